"""The ray executor passes Evret's executor conformance suite, on the module's local 2-CPU cluster (conftest.py),
with one executor (and so one set of kept workers) for the whole class."""

from __future__ import annotations

from collections.abc import Iterator
from importlib.metadata import entry_points

import evret_ray
import pytest
from evret_ray.executor import RayExecutor

from evret_core.plugins.loading import get_registry, register_plugin
from evret_core.testing import ExecutorConformance


@pytest.fixture(autouse=True)
def ray_plugin() -> None:
    installed = any(ep.name == "evret-ray" for ep in entry_points(group="evret"))
    if not installed and "evret-ray" not in get_registry().plugins:  # a checkout without the install: added
        register_plugin(evret_ray, name="evret-ray")


class TestRayExecutorConformance(ExecutorConformance):
    @pytest.fixture(scope="class")
    @classmethod
    def executor(cls) -> Iterator[RayExecutor]:
        executor = RayExecutor(workers=2)
        yield executor
        executor.shutdown()
