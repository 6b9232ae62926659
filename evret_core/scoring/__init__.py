"""Output evaluators: score what a pipeline produced, record by record (``evret score``)."""
