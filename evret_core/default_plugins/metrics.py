"""Built-in metric families, registered through the same hook as third-party metrics."""

from __future__ import annotations

from evret_core.hookspecs import Register, hookimpl


@hookimpl
def register_metrics(register: Register) -> None:
    from evret_core.metrics.ir import ALL_METRICS

    for family, cls in ALL_METRICS.items():
        register(family, cls)
