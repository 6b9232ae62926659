"""Stage 1, data in and out: every file format Evret reads and writes (datasets, corpora, run files, JSON and JSON
Lines), the dataset's content hash, safe output writing, redaction, the run-config base and where the cache lives."""
