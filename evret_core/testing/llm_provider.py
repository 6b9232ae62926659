"""A provider in the core's test kit: OpenAI chat completions over plain asyncio HTTP, no SDK.

:class:`WireProvider` lets the core's tests (and a plugin author's) drive every LLM-calling part of Evret against
:class:`~evret_core.testing.llm_stubs.StubLLMServer` with no provider plugin installed. It is a real
:class:`~evret_core.llm.providers.SDKProvider`: its "SDK client" is a small HTTP/1.1 client, and failures map to
:class:`~evret_core.contracts.provider.LLMCallError` through the same helpers the bundled providers use. Register it under the
name ``stub`` with :func:`register_stub_provider` (the registry forgets it on ``reset_registry()``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from evret_core.contracts.errors import EvretError
from evret_core.contracts.provider import ChatMessage, LLMResponse
from evret_core.llm.providers import SDKProvider

__all__ = ["PROVIDER_NAME", "WireProvider", "register_stub_provider", "stub_options"]

PROVIDER_NAME = "stub"


class _HTTPClient:
    """One POST per connection (``Connection: close``): enough for a loopback stub, and no pool to manage."""

    def __init__(self, base_url: str, api_key: str) -> None:
        parts = urlsplit(base_url)
        if parts.scheme != "http" or not parts.hostname:
            raise EvretError(f"stub provider: base_url must be an http:// URL, got {base_url!r}")
        self.host = parts.hostname
        self.port = parts.port or 80
        self.prefix = parts.path.rstrip("/")
        self.api_key = api_key

    async def post(self, path: str, payload: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        body = json.dumps(payload).encode("utf-8")
        reader, writer = await asyncio.open_connection(self.host, self.port)
        try:
            head = (f"POST {self.prefix}{path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
                    f"Authorization: Bearer {self.api_key}\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n")
            writer.write(head.encode("latin-1") + body)
            await writer.drain()
            raw = await reader.read()
        finally:
            writer.close()
            try:
                await writer.wait_closed()
            except OSError:
                pass
        header_block, _, content = raw.partition(b"\r\n\r\n")
        lines = header_block.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        return status, headers, content

    async def close(self) -> None:
        return None


class WireProvider(SDKProvider):
    """OpenAI chat completions (``POST {base_url}/chat/completions``) without an SDK; key from ``api_key`` or
    ``EVRET_STUB_API_KEY``. Default model: ``stub-model``."""

    name = PROVIDER_NAME
    default_model = "stub-model"
    api_key_env = ("EVRET_STUB_API_KEY",)

    def __init__(self, model: str | None = None, api_key: str | None = None, base_url: str | None = None,
                 timeout: float | None = 60.0) -> None:
        if not base_url:
            raise EvretError("stub provider: option 'base_url' is required (the stub server's openai_base_url)")
        super().__init__(model, api_key, base_url, timeout)

    def _make_client(self, api_key: str) -> Any:
        return _HTTPClient(str(self.base_url), api_key)

    async def acomplete(self, messages: Sequence[ChatMessage], *, temperature: float = 0.0,
                        max_tokens: int | None = None) -> LLMResponse:
        payload: dict[str, Any] = {"model": self.model, "temperature": temperature,
                                   "messages": [{"role": m.role, "content": m.content} for m in messages]}
        if max_tokens is not None:
            payload["max_tokens"] = max_tokens
        try:
            status, headers, content = await self._sdk().post("/chat/completions", payload)
        except (OSError, ValueError, IndexError) as exc:
            raise self.connection_error(f"{type(exc).__name__}: {exc}") from None
        try:
            data = json.loads(content or b"{}")
        except json.JSONDecodeError:
            data = {}
        if status != 200:
            message = (data.get("error") or {}).get("message") if isinstance(data, dict) else None
            raise self.status_error(status, message or content[:200].decode("utf-8", "replace"), headers)
        choice = (data.get("choices") or [{}])[0]
        usage = data.get("usage") or {}
        return LLMResponse(text=str((choice.get("message") or {}).get("content") or ""),
                           input_tokens=int(usage.get("prompt_tokens") or 0),
                           output_tokens=int(usage.get("completion_tokens") or 0),
                           model=data.get("model") or self.model)


def _factory(**options: Any) -> WireProvider:
    return WireProvider(**options)


_factory.default_model = WireProvider.default_model  # type: ignore[attr-defined]


class _Plugin:
    from evret_core.contracts.hooks import hookimpl as _hookimpl

    @_hookimpl
    def register_llm_providers(self, register: Any) -> None:
        register(PROVIDER_NAME, _factory)


def register_stub_provider() -> None:
    """Register :class:`WireProvider` as the LLM provider ``stub`` (once per registry)."""
    from evret_core.plugins.loading import get_registry, register_plugin

    if "evret-testing-stub" not in get_registry().plugins:
        register_plugin(_Plugin(), name="evret-testing-stub")


def stub_options(server: Any, model: str = "gpt-stub") -> dict[str, Any]:
    """Options that point an LLM judge or evaluator at ``server`` through the ``stub`` provider (registered
    here if needed)."""
    register_stub_provider()
    return {"provider": PROVIDER_NAME, "model": model, "base_url": server.openai_base_url, "api_key": "sk-stub"}
