"""Built-in retrieval evaluator type: ``retrieval`` (a retriever scored on a dataset)."""

from __future__ import annotations

from evret_core.default_plugins import LazyFactory
from evret_core.hookspecs import Register, hookimpl


@hookimpl
def register_retrieval_evaluators(register: Register) -> None:
    register("retrieval", LazyFactory("evret_core.evaluators.retrieval:Evaluator"))
