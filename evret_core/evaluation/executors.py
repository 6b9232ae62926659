"""The executors of this package: :class:`LocalExecutor` (``"local"``, the default) runs every stage of an
evaluation in this process, and :func:`resolve_executor` turns what a user gives (a registered name, an object) into
an executor. The contract every executor follows is :mod:`evret_core.contracts.executor`.
"""

from __future__ import annotations

from typing import Any

from evret_core.contracts.errors import EvretError
from evret_core.contracts.executor import Executor

__all__ = ["LocalExecutor", "resolve_executor"]


class LocalExecutor(Executor):
    """Runs every stage in this process, chunk after chunk: Evret's behaviour without a plugin."""


def resolve_executor(executor: Any, options: dict[str, Any] | None = None) -> Executor:
    """An executor object as is, or the one registered under a name (``"local"``, ``"ray"``...) built with
    ``options``."""
    if executor is None:
        executor = "local"
    if isinstance(executor, str):
        from evret_core.plugins.registry import create_executor

        built = create_executor(executor, **(options or {}))
        if not isinstance(built, Executor):
            raise EvretError(f"executor {executor!r}: its factory returned {type(built).__name__}, not an Executor")
        return built
    if options:
        raise EvretError("executor_options apply to an executor given by name, not to an Executor object")
    if not isinstance(executor, Executor):
        raise EvretError(f"executor must be a registered name or an Executor, got {type(executor).__name__}")
    return executor
