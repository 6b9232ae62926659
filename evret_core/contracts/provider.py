"""The provider-agnostic LLM interface that provider plugins implement (the base of the ``llm_provider`` kind).

A provider (registered through ``register_llm_providers``) turns chat messages into text plus token usage,
asynchronously. Retries, backoff, rate limits, concurrency bounds, caching and cost accounting are Evret's job,
not the provider's: providers make exactly one attempt per call and raise :class:`LLMCallError` saying whether
the failure is worth retrying.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import field
from typing import Any

from evret_core.contracts.values import Value, value_type


@value_type
class ChatMessage(Value):
    """One chat message: ``role`` is ``system``, ``user`` or ``assistant``."""

    role: str
    content: str


@value_type
class LLMResponse(Value):
    """What one successful call returned."""

    text: str
    input_tokens: int = 0
    output_tokens: int = 0
    model: str | None = None
    raw: dict[str, Any] = field(default_factory=dict)


class LLMCallError(Exception):
    """One call failed. ``retryable`` for 429, 5xx, connection errors and timeouts; ``retry_after`` in seconds
    when the server said how long to wait (Retry-After)."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        status: int | None = None,
        retry_after: float | None = None,
        kind: str | None = None,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after
        self.kind = kind or ("http" if status else "error")

    @property
    def label(self) -> str:
        """How the failure is counted in stats: ``HTTP <status>``, ``timeout``, ``connection`` or ``error``."""
        return f"HTTP {self.status}" if self.status else self.kind


class LLMProvider(ABC):
    """An async chat-completion endpoint. ``name`` is the registered provider name, ``model`` the model used."""

    name: str = "provider"
    default_model: str = ""
    #: True when :meth:`acomplete` takes ``json_schema=`` (a JSON Schema dict) and hands it to the model's own
    #: structured-output mechanism: the API constrains the answer (a response format, a forced tool, a response
    #: schema) or the model is decoded under it in process. :func:`~evret_core.llm.structured.structured_call`
    #: passes its schema to such providers only (other providers keep the two-keyword signature) and still
    #: validates every answer and sends an invalid one back for repair, since not every API guarantees a match.
    constrains_json: bool = False
    #: the most calls the provider can serve at once (an in-process model: 1), or None for no bound of its own;
    #: :class:`~evret_core.llm.client.LLMClient` queues calls beyond it before their timeout starts.
    max_concurrency: int | None = None
    #: True when :meth:`acomplete` takes ``timeout=`` (seconds, or None for no limit) and enforces it itself,
    #: counting the call's own work only (an in-process model: from when its batch starts, not while it waits for
    #: the model), raising :class:`LLMCallError` with ``kind="timeout"`` and its own ``retryable``.
    #: :class:`~evret_core.llm.client.LLMClient` then passes its timeout and does not cancel the call; for other
    #: providers (False: hosted APIs) it cancels an attempt after ``timeout`` seconds and retries it.
    enforces_timeout: bool = False

    def __init__(self, model: str | None = None) -> None:
        self.model = model or self.default_model

    @abstractmethod
    async def acomplete(
        self,
        messages: Sequence[ChatMessage],
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> LLMResponse:
        """One attempt at a chat completion; raise :class:`LLMCallError` on failure (never retry here)."""

    async def warmup(self) -> None:
        """Called once by :class:`~evret_core.llm.client.LLMClient` before its first call, outside every call's
        timeout: load or convert a model here. Default: nothing to do."""
        return None

    async def aclose(self) -> None:
        """Release connections; called once when a judge or evaluator is done with the provider."""
        return None

    def config(self) -> dict[str, Any]:
        """Identifying settings for manifests and cache keys. Never include API keys."""
        return {"provider": self.name, "model": self.model}
