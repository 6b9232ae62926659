"""Local HTTP servers that speak the LLM providers' wire formats, for tests and benchmarks.

One :class:`StubLLMServer` on 127.0.0.1 answers, by path:

- ``POST .../chat/completions``: OpenAI chat completions (point the OpenAI SDK at :attr:`StubLLMServer.openai_base_url`);
- ``POST .../messages``: Anthropic messages (``base_url`` = :attr:`StubLLMServer.url`);
- ``POST .../models/{model}:generateContent``: Gemini generateContent (``base_url`` = :attr:`StubLLMServer.url`).

A request that asks for structured output in its API's own way is answered in that API's shape:
:attr:`StubRequest.json_schema` is the schema it carried, and an Anthropic request that forces a tool gets the
answer text (when it is a JSON object) as that tool's ``tool_use`` input; OpenAI and Gemini answer JSON as text.

A *responder* decides each answer from the parsed request: it returns the answer text, or a :class:`StubReply`
with a status, headers (``Retry-After``) and a delay before answering (a large delay is a hanging server). The
server records every request and the most requests it ever had in flight at once; ``GET /_stub/stats`` returns
those counters as JSON (for a server run in another process).

The test helpers at the end (:func:`isolate_llm_env`, :func:`stub_judge`, :func:`judgment_context`,
:func:`expected_text`, :func:`openai_options`, :func:`first_user_prompt`) are the scaffolding the provider and
LLM-evaluator tests share.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evret_core.contracts.judge import JudgmentContext
    from evret_core.judge.llm import LLMJudge

__all__ = ["StubLLMServer", "StubReply", "StubRequest", "FailFirst", "OverLimit429", "always", "EXPECTED_FENCE", "expected_text",
           "judgment_context", "isolate_llm_env", "stub_judge", "openai_options", "first_user_prompt"]


@dataclass
class StubRequest:
    """One request as the stub understood it. ``api`` is ``openai``, ``anthropic`` or ``gemini``."""

    index: int
    api: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    model: str
    system: str
    prompt: str
    received_at: float = 0.0
    in_flight: int = 1  # requests being handled when this one arrived, itself included

    @property
    def text(self) -> str:
        """System and user text together: what a test searches for injected or fenced content."""
        return f"{self.system}\n{self.prompt}"

    @property
    def json_schema(self) -> dict[str, Any] | None:
        """The JSON Schema the request asked the answer to match through its API's own mechanism, or None:
        OpenAI ``response_format`` ``json_schema``, the Anthropic tool that ``tool_choice`` forces (its
        ``input_schema``), Gemini ``generationConfig.responseJsonSchema``."""
        return _structured_schema(self.api, self.body)

    @property
    def fingerprint(self) -> str:
        """A hash of the request content, equal for retries of the same request."""
        return hashlib.sha256(json.dumps([self.model, self.system, self.prompt]).encode()).hexdigest()


@dataclass
class StubReply:
    """What to answer: ``text`` with ``status`` 200, or an error ``status`` (429, 500...) with ``headers``;
    ``delay`` seconds are waited first. ``body`` replaces the whole JSON body when given."""

    text: str = "YES"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    body: dict[str, Any] | None = None


Responder = Callable[[StubRequest], "str | StubReply"]


def always(text: str = "YES", delay: float = 0.0) -> Responder:
    """A responder that answers ``text`` to everything, after ``delay`` seconds."""

    def respond(request: StubRequest) -> StubReply:
        return StubReply(text=text, delay=delay)

    return respond


class FailFirst:
    """Wraps a responder: the chosen requests fail ``times`` times (by :attr:`StubRequest.fingerprint`, so a
    retry of the same request counts) with ``status`` and an optional Retry-After, then get the real answer.

    ``select(request) -> bool`` chooses which requests fail; default: all of them.
    """

    def __init__(
        self,
        inner: Responder,
        *,
        times: int = 1,
        status: int = 429,
        retry_after: float | None = None,
        select: Callable[[StubRequest], bool] | None = None,
    ) -> None:
        self.inner = inner
        self.times = times
        self.status = status
        self.retry_after = retry_after
        self.select = select
        self._failures: dict[str, int] = {}
        self._lock = threading.Lock()
        self.failed = 0

    def __call__(self, request: StubRequest) -> str | StubReply:
        if self.select is None or self.select(request):
            with self._lock:
                done = self._failures.get(request.fingerprint, 0)
                if done < self.times:
                    self._failures[request.fingerprint] = done + 1
                    self.failed += 1
                    headers = {} if self.retry_after is None else {"Retry-After": f"{self.retry_after:g}"}
                    return StubReply(status=self.status, headers=headers)
        return self.inner(request)


class OverLimit429:
    """Wraps a responder: a request that arrives while more than ``limit`` are in flight gets a 429 (no
    Retry-After), as a server with a concurrency quota answers. :attr:`rejected` counts them."""

    def __init__(self, inner: Responder, limit: int) -> None:
        self.inner = inner
        self.limit = limit
        self.rejected = 0
        self._lock = threading.Lock()

    def __call__(self, request: StubRequest) -> str | StubReply:
        if request.in_flight > self.limit:
            with self._lock:
                self.rejected += 1
            return StubReply(status=429)
        return self.inner(request)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_content_text(part) for part in content)
    if isinstance(content, dict):
        if "text" in content:
            return str(content["text"])
        if "parts" in content:
            return _content_text(content["parts"])
        if "content" in content:
            return _content_text(content["content"])
    return ""


def _parse(api: str, path: str, body: dict[str, Any]) -> tuple[str, str, str]:
    """(model, system text, user text) of a request in ``api``'s format."""
    if api == "openai":
        system = [_content_text(m.get("content")) for m in body.get("messages", []) if m.get("role") in
                  ("system", "developer")]
        user = [_content_text(m.get("content")) for m in body.get("messages", []) if m.get("role") not in
                ("system", "developer")]
        return str(body.get("model", "")), "\n".join(system), "\n".join(user)
    if api == "anthropic":
        user = [_content_text(m.get("content")) for m in body.get("messages", [])]
        return str(body.get("model", "")), _content_text(body.get("system", "")), "\n".join(user)
    model = path.rsplit("/models/", 1)[-1].split(":", 1)[0]
    system_instruction = body.get("systemInstruction") or body.get("system_instruction") or {}
    user = [_content_text(c) for c in body.get("contents", [])]
    return model, _content_text(system_instruction), "\n".join(user)


def _forced_tool(body: dict[str, Any]) -> dict[str, Any] | None:
    """The tool an Anthropic request's ``tool_choice`` forces (``{"type": "tool", "name": ...}``), or None."""
    choice = body.get("tool_choice")
    if not isinstance(choice, dict) or choice.get("type") != "tool":
        return None
    return next((t for t in body.get("tools") or [] if isinstance(t, dict) and t.get("name") == choice.get("name")),
                None)


def _structured_schema(api: str, body: dict[str, Any]) -> dict[str, Any] | None:
    if api == "openai":
        format_ = body.get("response_format")
        if isinstance(format_, dict) and format_.get("type") == "json_schema":
            schema = (format_.get("json_schema") or {}).get("schema")
            return schema if isinstance(schema, dict) else None
        return None
    if api == "anthropic":
        tool = _forced_tool(body)
        schema = None if tool is None else tool.get("input_schema")
        return schema if isinstance(schema, dict) else None
    config = body.get("generationConfig") or body.get("generation_config") or {}
    schema = config.get("responseJsonSchema") or config.get("response_json_schema")
    return schema if isinstance(schema, dict) else None


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


def _success_body(api: str, request: StubRequest, text: str) -> dict[str, Any]:
    n_in, n_out = _tokens(request.text), _tokens(text)
    if api == "openai":
        return {
            "id": f"chatcmpl-stub-{request.index}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop",
                         "logprobs": None}],
            "usage": {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out},
        }
    if api == "anthropic":
        # a forced tool gets its input as a tool_use block, as the Messages API answers; text that is no JSON
        # object stays a text block (what a proxy that ignores tools would send)
        tool = _forced_tool(request.body)
        tool_input = None if tool is None else _json_object(text)
        content: list[dict[str, Any]] = (
            [{"type": "text", "text": text}] if tool is None or tool_input is None else
            [{"type": "tool_use", "id": f"toolu_stub_{request.index}", "name": tool["name"], "input": tool_input}])
        return {
            "id": f"msg_stub_{request.index}",
            "type": "message",
            "role": "assistant",
            "model": request.model,
            "content": content,
            "stop_reason": "end_turn" if tool_input is None else "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": n_in, "output_tokens": n_out},
        }
    return {
        "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP",
                        "index": 0}],
        "usageMetadata": {"promptTokenCount": n_in, "candidatesTokenCount": n_out, "totalTokenCount": n_in + n_out},
        "modelVersion": request.model,
    }


_STATUS_NAMES = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
                 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}


def _error_body(api: str, status: int) -> dict[str, Any]:
    message = f"stub error {status}"
    if api == "openai":
        return {"error": {"message": message, "type": "rate_limit_exceeded" if status == 429 else "server_error",
                          "param": None, "code": None}}
    if api == "anthropic":
        kind = {429: "rate_limit_error", 401: "authentication_error", 529: "overloaded_error"}.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"code": status, "message": message, "status": _STATUS_NAMES.get(status, "UNKNOWN")}}


class StubLLMServer:
    """A threaded HTTP server on 127.0.0.1 speaking the OpenAI, Anthropic and Gemini wire formats.

    Use as a context manager. :attr:`requests` lists every request received (in arrival order) and
    :attr:`max_in_flight` the largest number handled at once.
    """

    def __init__(self, responder: Responder | None = None) -> None:
        self.responder: Responder = responder or always("YES")
        self.requests: list[StubRequest] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------------------------
    def start(self) -> StubLLMServer:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # headers and body go out as two writes: without TCP_NODELAY, Nagle + delayed ACK stall each reply ~40 ms
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read the records instead
                return None

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                try:
                    stub._handle(self)
                except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
                    pass  # the client gave up (timeout) or the server is stopping

            def do_GET(self) -> None:  # noqa: N802 - counters for a server run in another process
                if self.path.split("?", 1)[0] != "/_stub/stats":
                    stub._send(self, 404, {"error": {"message": "stub: unknown path"}}, {})
                    return
                with stub._lock:
                    payload = {"requests": len(stub.requests), "max_in_flight": stub.max_in_flight,
                               "in_flight": stub.in_flight}
                stub._send(self, 200, payload, {})

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            block_on_close = False
            request_queue_size = 256

            def handle_error(self, request: Any, client_address: Any) -> None:
                return None

        self._server = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="evret-stub-llm", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> StubLLMServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- addresses -----------------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``: the base URL for the Anthropic and Gemini SDKs."""
        assert self._server is not None, "start the server first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def openai_base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``: the base URL for the OpenAI SDK."""
        return self.url + "/v1"

    def reset(self) -> None:
        """Forget the recorded requests and the in-flight maximum."""
        with self._lock:
            self.requests.clear()
            self.max_in_flight = self.in_flight

    # -- handling ------------------------------------------------------------------------------------------
    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        path = handler.path.split("?", 1)[0]
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        if path.endswith("/chat/completions"):
            api = "openai"
        elif path.endswith("/messages"):
            api = "anthropic"
        elif path.endswith(":generateContent"):
            api = "gemini"
        else:
            self._send(handler, 404, {"error": {"message": f"stub: unknown path {path}"}}, {})
            return
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._send(handler, 400, {"error": {"message": "stub: body is not JSON"}}, {})
            return
        model, system, prompt = _parse(api, path, body)
        with self._lock:
            request = StubRequest(index=len(self.requests), api=api, path=path,
                                  headers={k.lower(): v for k, v in handler.headers.items()}, body=body,
                                  model=model, system=system, prompt=prompt, received_at=time.monotonic())
            self.requests.append(request)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            request.in_flight = self.in_flight
        try:
            reply = self.responder(request)
            if isinstance(reply, str):
                reply = StubReply(text=reply)
            if reply.delay > 0 and self._stop.wait(reply.delay):
                return
            if reply.body is not None:
                payload = reply.body
            elif reply.status == 200:
                payload = _success_body(api, request, reply.text)
            else:
                payload = _error_body(api, reply.status)
            self._send(handler, reply.status, payload, reply.headers)
        finally:
            with self._lock:
                self.in_flight -= 1

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, payload: dict[str, Any], headers: dict[str, str]) -> None:
        data = json.dumps(payload).encode("utf-8")
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        for key, value in headers.items():
            handler.send_header(key, value)
        handler.end_headers()
        handler.wfile.write(data)
        handler.wfile.flush()


# -- test scaffolding shared by the provider and LLM-evaluator tests ------------------------------------------------

# The expected answer as LLMJudge fences it in its prompt: group 2 is the text.
EXPECTED_FENCE = re.compile(r"<expected-([0-9a-f]+)>\n(.*?)\n</expected-\1>", re.S)


def expected_text(request_text: str) -> str:
    """The expected answer fenced in an LLMJudge prompt (``StubRequest.text``); fails when there is none."""
    match = EXPECTED_FENCE.search(request_text)
    assert match, request_text
    return match.group(2)


def judgment_context(i: int, retrieved: str = "passage") -> JudgmentContext:
    """The i-th test judgment: query ``query i``, expected ``answer-i``, retrieved ``<retrieved> i``."""
    from evret_core.contracts.judge import JudgmentContext

    return JudgmentContext(query=f"query {i}", expected_text=f"answer-{i}", retrieved_text=f"{retrieved} {i}")


def isolate_llm_env(monkeypatch: Any, tmp_path: Path, *env_names: str) -> Path:
    """Give a test its own answer cache (``EVRET_CACHE_DIR`` under ``tmp_path``, returned) and unset the
    provider variables ``env_names``, so that neither another test's answers nor the caller's keys leak in."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("EVRET_CACHE_DIR", str(cache))
    for name in env_names:
        monkeypatch.delenv(name, raising=False)
    return cache


def stub_judge(provider: str, server: StubLLMServer, api_key: str, *, base_url: str | None = None,
               backoff_base: float | None = 0.01, **options: Any) -> LLMJudge:
    """An uncached (unless ``cache=`` is given) :class:`~evret_core.judge.llm.LLMJudge` of ``provider`` pointed
    at ``server`` (``base_url`` defaults to :attr:`StubLLMServer.url`); ``backoff_base`` shortens retry waits
    (None keeps the client's default)."""
    from evret_core.judge.llm import LLMJudge

    options.setdefault("cache", False)
    judge = LLMJudge(provider=provider, api_key=api_key, base_url=base_url or server.url, **options)
    if backoff_base is not None:
        judge.client.backoff_base = backoff_base
    return judge


def openai_options(server: StubLLMServer) -> dict[str, Any]:
    """Options that point an LLM evaluator's ``openai`` provider at ``server`` (model ``gpt-stub``)."""
    return {"provider": "openai", "model": "gpt-stub", "base_url": server.openai_base_url, "api_key": "sk-stub"}


def first_user_prompt(request: StubRequest) -> str:
    """The first user message of an OpenAI chat-completions request (a repair turn adds later ones)."""
    return next(str(m["content"]) for m in request.body["messages"] if m["role"] == "user")
