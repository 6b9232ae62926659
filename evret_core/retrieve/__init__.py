"""Stage 2, retrieve: the retriever contract, adapters, vector-store pieces, retrieved rows as columns."""
