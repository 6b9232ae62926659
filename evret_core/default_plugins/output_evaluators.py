"""Built-in output evaluator types: ``exact``, ``regex`` and ``llm-score``."""

from __future__ import annotations

from evret_core.default_plugins import LazyFactory
from evret_core.hookspecs import Register, hookimpl


@hookimpl
def register_evaluators(register: Register) -> None:
    register("exact", LazyFactory("evret_core.evaluators.text_outputs:ExactOutputEvaluator"))
    register("regex", LazyFactory("evret_core.evaluators.text_outputs:RegexOutputEvaluator"))
    register("llm-score", LazyFactory("evret_core.evaluators.llm_score:LLMScoreEvaluator"))
