"""Adversarial conditions for RAG: the perturbation families and adversarial cases kept as JSONL."""
