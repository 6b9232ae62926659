"""Stage 7, results: retrieval and RAG results, per-query detail, tables, safe output files and redaction."""
