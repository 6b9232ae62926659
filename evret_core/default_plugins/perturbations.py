"""Built-in adversarial families: counterfactual, injection, missing-gold, irrelevant-only."""

from __future__ import annotations

from evret_core.hookspecs import Register, hookimpl


@hookimpl
def register_perturbations(register: Register) -> None:
    from evret_core.rag.adversarial import Counterfactual, Injection, IrrelevantOnly, MissingGold

    register("counterfactual", Counterfactual)
    register("injection", Injection)
    register("missing-gold", MissingGold)
    register("irrelevant-only", IrrelevantOnly)
