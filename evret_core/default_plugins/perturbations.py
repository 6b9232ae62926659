"""Built-in adversarial families: counterfactual, injection, missing-gold, irrelevant-only."""

from __future__ import annotations

from evret_core.default_plugins import LazyFactory
from evret_core.hookspecs import Register, hookimpl


@hookimpl
def register_perturbations(register: Register) -> None:
    register("counterfactual", LazyFactory("evret_core.rag.counterfactual:Counterfactual"))
    register("injection", LazyFactory("evret_core.rag.adversarial:Injection"))
    register("missing-gold", LazyFactory("evret_core.rag.adversarial:MissingGold"))
    register("irrelevant-only", LazyFactory("evret_core.rag.adversarial:IrrelevantOnly"))
