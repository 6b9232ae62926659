"""evret-ray: the ``ray`` executor, which runs an evaluation's expensive stages on a Ray cluster.

Ray is imported only when a ``ray`` executor is built, so listing plugins stays fast.
"""

from __future__ import annotations

from evret_core.default_plugins import LazyFactory  # its signature names RayExecutor's options
from evret_core.hookspecs import Register, hookimpl

__all__ = ["register_executors"]


@hookimpl
def register_executors(register: Register) -> None:
    register("ray", LazyFactory("evret_ray.executor:RayExecutor"))
