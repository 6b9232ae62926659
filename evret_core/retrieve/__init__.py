"""Stage 2, retrieve: retriever adapters, the run retriever, vector-store pieces."""
