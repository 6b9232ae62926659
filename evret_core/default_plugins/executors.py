"""Built-in executor: ``local``, every stage in this process."""

from __future__ import annotations

from evret_core.hookspecs import Register, hookimpl


@hookimpl
def register_executors(register: Register) -> None:
    from evret_core.executors import LocalExecutor

    register("local", LocalExecutor)
