"""RAG stage 2, generate: generators turn a question and its contexts into an answer with claims."""
