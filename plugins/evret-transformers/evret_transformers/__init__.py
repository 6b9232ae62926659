"""Hugging Face causal language models run in process as an Evret LLM provider; torch and transformers are
imported only when a model is first used."""

DEFAULT_MODEL = "Qwen/Qwen2.5-0.5B-Instruct"

__all__ = ["DEFAULT_MODEL"]
