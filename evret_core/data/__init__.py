"""Stage 1, data in: queries and datasets, dataset and corpus files, run files, the dataset's content hash."""
