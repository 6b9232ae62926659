"""Run a coroutine to completion from synchronous code, even when an event loop is already running."""

from __future__ import annotations

import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` when no loop runs in this thread; otherwise run it on a fresh loop in a helper thread.

    This is what lets ``judge.batch_judge`` work inside Jupyter or an async application without nest_asyncio.
    """
    import asyncio  # not at the top: it takes twice as long to import as the SDK, which must not load it

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: dict[str, Any] = {}

    def runner() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=runner, name="evret-run-sync", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]
