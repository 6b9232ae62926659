"""RAG stage 3, claims: is each claim of an answer supported by the contexts the generator saw."""
