"""Stage 7, results: retrieval and RAG results, per-query detail, tables, regression gates, safe output files and redaction."""
