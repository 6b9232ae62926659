"""Built-in criteria judges, registered as evaluator types ``direct`` and ``pairwise``.

Criteria judges are evaluator types (same registry, same ``create_evaluator``/``evret score``) rather than a
registry kind of their own: a third-party judge registers through ``register_evaluators`` like any other type.
"""

from __future__ import annotations

from evret_core.hookspecs import Register, hookimpl


@hookimpl
def register_evaluators(register: Register) -> None:
    from evret_core.criteria import DirectJudge, PairwiseJudge

    register("direct", DirectJudge)
    register("pairwise", PairwiseJudge)
