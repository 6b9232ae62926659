"""Built-in executor: ``local``, every stage in this process."""

from __future__ import annotations

from evret_core.default_plugins import LazyFactory
from evret_core.hookspecs import Register, hookimpl


@hookimpl
def register_executors(register: Register) -> None:
    register("local", LazyFactory("evret_core.executors:LocalExecutor"))
