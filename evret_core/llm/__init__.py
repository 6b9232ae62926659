"""The one LLM layer: every judge and evaluator that calls an LLM goes through it.

- :mod:`~evret_core.llm.providers`: the provider interface plugins implement (:class:`LLMProvider`,
  :class:`SDKProvider`), and HTTP status to :class:`LLMCallError`;
- :mod:`~evret_core.llm.settings`: :class:`LLMSettings`, the options and defaults of every LLM caller;
- :mod:`~evret_core.llm.client`: :class:`LLMClient`, the one call policy (retries, Retry-After, adaptive
  concurrency, requests- and tokens-per-minute budgets, a shared :class:`InFlightLimiter`), and :func:`gather_all` / :func:`run_all`;
- :mod:`~evret_core.llm.cache`: the persistent answer cache and its one key scheme;
- :mod:`~evret_core.llm.fencing`: untrusted text fenced as data;
- :mod:`~evret_core.llm.injection`: prompt-injection patterns found in judged texts (reported, never acted on);
- :mod:`~evret_core.llm.structured`: :func:`structured_call`, JSON answers validated against a pydantic schema;
- :mod:`~evret_core.llm.choices`: :func:`with_choices`, a schema listing the values a field may take in one call.
"""

from evret_core.llm.cache import JudgmentCache, cache_key, judgment_key, resolve_cache
from evret_core.llm.choices import with_choices
from evret_core.llm.client import LLMClient, LLMUsage, estimate_tokens, gather_all, run_all
from evret_core.llm.fencing import fence, fence_notice, format_field, new_nonce, strip_lookalikes
from evret_core.llm.injection import InjectionScan, find_injections
from evret_core.llm.providers import (
    FATAL_STATUSES,
    RETRYABLE_STATUSES,
    ChatMessage,
    LLMCallError,
    LLMProvider,
    LLMResponse,
    SDKProvider,
    is_retryable_status,
    parse_retry_after,
    redact,
    status_error,
)
from evret_core.llm.rate_limits import (
    AdaptiveConcurrency,
    InFlightLimiter,
    RateLimiter,
    shared_limiter,
    use_shared_limiter,
)
from evret_core.llm.settings import LLMSettings
from evret_core.llm.structured import (
    AnswerError,
    Structured,
    parse_json_object,
    parse_model,
    structured_call,
    structured_key,
)

__all__ = [
    "FATAL_STATUSES", "RETRYABLE_STATUSES", "AdaptiveConcurrency", "AnswerError", "ChatMessage", "InFlightLimiter",
    "InjectionScan", "JudgmentCache",
    "LLMCallError", "LLMClient", "LLMProvider", "LLMResponse", "LLMSettings", "LLMUsage", "RateLimiter",
    "SDKProvider", "Structured", "cache_key", "estimate_tokens", "fence", "fence_notice", "format_field",
    "find_injections", "gather_all", "is_retryable_status", "judgment_key", "new_nonce", "parse_json_object", "parse_model",
    "parse_retry_after", "redact", "resolve_cache", "run_all", "shared_limiter", "status_error", "strip_lookalikes",
    "structured_call", "structured_key", "use_shared_limiter", "with_choices",
]
