"""Built-in metric families."""

from __future__ import annotations

from evret_core.hookspecs import Register, hookimpl


@hookimpl
def register_metrics(register: Register) -> None:
    from evret_core.metrics import ir

    register("precision", ir.Precision)
    register("recall", ir.Recall)
    register("mrr", ir.MRR)
    register("ndcg", ir.NDCG)
    register("hit_rate", ir.HitRate)
    register("ap", ir.AveragePrecision)
