"""RAG stage 1, questions: question sets, RGB import, context conditions and the texts a generator saw."""
