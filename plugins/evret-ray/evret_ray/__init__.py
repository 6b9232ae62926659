"""evret-ray: the ``ray`` executor, which runs an evaluation's expensive stages on a Ray cluster.

Ray is imported only when a ``ray`` executor is built, so listing plugins stays fast.
"""

from __future__ import annotations

from typing import Any

from evret_core.hookspecs import Register, hookimpl

__all__ = ["register_executors"]


def _make(**options: Any) -> Any:
    from evret_ray.executor import RayExecutor

    return RayExecutor(**options)


@hookimpl
def register_executors(register: Register) -> None:
    register("ray", _make)
