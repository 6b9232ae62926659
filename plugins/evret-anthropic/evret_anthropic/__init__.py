"""Anthropic Claude models as an Evret LLM provider; the SDK is imported only when a provider is built."""

DEFAULT_MODEL = "claude-haiku-4-5"

__all__ = ["DEFAULT_MODEL"]
