"""Built-in evaluator types."""

from __future__ import annotations

from evret_core.hookspecs import Register, hookimpl


@hookimpl
def register_evaluators(register: Register) -> None:
    from evret_core.evaluators.retrieval import Evaluator

    register("retrieval", Evaluator)
