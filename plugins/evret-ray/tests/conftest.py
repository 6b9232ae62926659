"""One local Ray cluster per test module (2 CPUs, no dashboard, usage stats off), started before the module's
first test and stopped after its last."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

os.environ["RAY_USAGE_STATS_ENABLED"] = "0"  # before ray is first imported
os.environ["RAY_DISABLE_USAGE_STATS"] = "1"

import ray  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def cluster() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             runtime_env={"env_vars": {"RAY_USAGE_STATS_ENABLED": "0"}})
    yield
    ray.shutdown()
