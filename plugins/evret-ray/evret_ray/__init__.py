"""evret-ray: the ``ray`` executor, which runs an evaluation's expensive stages on a Ray cluster.

Ray is imported only when a ``ray`` executor is built, so listing plugins stays fast.
"""

from __future__ import annotations

from evret_core.sdk import Executor, Register, hookimpl, lazy

__all__ = ["register_executors"]


@hookimpl
def register_executors(register: Register[Executor]) -> None:
    register("ray", lazy("evret_ray.executor:RayExecutor"))
