"""OpenAI chat models as an Evret LLM provider; the SDK is imported only when a provider is built."""

DEFAULT_MODEL = "gpt-4o-mini"

__all__ = ["DEFAULT_MODEL"]
