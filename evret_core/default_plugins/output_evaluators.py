"""Built-in output evaluator types: ``exact``, ``regex`` and ``llm-score``."""

from __future__ import annotations

from evret_core.hookspecs import Register, hookimpl


@hookimpl
def register_evaluators(register: Register) -> None:
    from evret_core.evaluators.llm_score import LLMScoreEvaluator
    from evret_core.evaluators.text import ExactOutputEvaluator, RegexOutputEvaluator

    register("exact", ExactOutputEvaluator)
    register("regex", RegexOutputEvaluator)
    register("llm-score", LLMScoreEvaluator)
