"""Stage 2, retrieve: the retriever contract, adapters, vector-store pieces."""
