"""Reports of evaluation results."""
