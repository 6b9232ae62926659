"""RAG stage 4, scores: correctness, behaviour, relevance, registrable RAG scores, their summaries."""
