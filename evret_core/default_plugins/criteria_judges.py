"""Built-in criteria judges, registered as evaluator types ``direct`` and ``pairwise``.

Criteria judges score records, so they are output evaluator types (same registry, same
``create_evaluator``/``evret score``) rather than a registry kind of their own: a third-party criteria judge
registers through ``register_evaluators`` like any other output evaluator.
"""

from __future__ import annotations

from evret_core.default_plugins import LazyFactory
from evret_core.hookspecs import Register, hookimpl


@hookimpl
def register_evaluators(register: Register) -> None:
    register("direct", LazyFactory("evret_core.criteria:DirectJudge"))
    register("pairwise", LazyFactory("evret_core.criteria:PairwiseJudge"))
