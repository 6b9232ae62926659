"""Google Gemini models as an Evret LLM provider; the SDK is imported only when a provider is built."""

DEFAULT_MODEL = "gemini-2.5-flash"

__all__ = ["DEFAULT_MODEL"]
