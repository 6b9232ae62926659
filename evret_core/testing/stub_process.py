"""A :class:`~evret_core.testing.llm_stubs.StubLLMServer` in a child process, for benchmarks.

In the benchmark's own process the stub's HTTP threads would share the GIL with the client being measured, and
its latency would include the client's work. :class:`StubProcess` starts the server in a spawned process and
stops it on exit; the responder is built there, by ``factory(*args)``, so it needs no pickling (a module-level
function and picklable arguments)::

    with StubProcess(always, "YES", delay=0.2) as stub:
        judge = LLMJudge(provider="openai", base_url=stub.openai_base_url, api_key="sk-bench")
        ...
        stub.stats()  # the server's counters: requests, most in flight
"""

from __future__ import annotations

import json
import multiprocessing
import urllib.request
from collections.abc import Callable
from typing import Any

from evret_core.testing.llm_stubs import StubLLMServer

__all__ = ["StubProcess"]


def _serve(conn: Any, factory: Callable[..., Any] | None, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    with StubLLMServer(factory(*args, **kwargs) if factory is not None else None) as server:
        conn.send(server.url)
        conn.recv()  # until told to stop


class StubProcess:
    """The stub server in a spawned child process (see the module); ``url``, ``openai_base_url``, ``stats()``."""

    def __init__(self, factory: Callable[..., Any] | None = None, *args: Any, **kwargs: Any) -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._proc = context.Process(target=_serve, args=(child, factory, args, kwargs), daemon=True)
        self.url = ""

    def __enter__(self) -> StubProcess:
        self._proc.start()
        if not self._conn.poll(60):
            self._proc.kill()
            raise RuntimeError("the stub server process did not start within 60 s")
        self.url = self._conn.recv()
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self._conn.send("stop")
        except (BrokenPipeError, OSError):
            pass
        self._proc.join(10)
        if self._proc.is_alive():
            self._proc.kill()

    @property
    def openai_base_url(self) -> str:
        """The base URL an OpenAI SDK client is given."""
        return self.url + "/v1"

    def stats(self) -> dict[str, int]:
        """The server's counters (``GET /_stub/stats``)."""
        with urllib.request.urlopen(self.url + "/_stub/stats") as response:
            return json.loads(response.read())  # type: ignore[no-any-return]
