"""Built-in metric families, registered through the same hook as third-party metrics.

The family -> class table is written out (tests/test_plugins.py checks it against
``evret_core.metrics.ir.ALL_METRICS``) so that registering them imports no numpy.
"""

from __future__ import annotations

from evret_core.default_plugins import LazyFactory
from evret_core.hookspecs import Register, hookimpl

FAMILIES = {
    "precision": "Precision", "recall": "Recall", "f1": "F1", "hit_rate": "HitRate", "mrr": "MRR", "ndcg": "NDCG",
    "ap": "AveragePrecision", "r_precision": "RPrecision", "bpref": "Bpref", "err": "ERR", "rbp": "RBP",
    "rbp_residual": "RBPResidual", "num_rel_ret": "NumRelRet", "num_rel": "NumRel", "num_ret": "NumRet",
}


@hookimpl
def register_metrics(register: Register) -> None:
    for family, cls in FAMILIES.items():
        register(family, LazyFactory(f"evret_core.metrics.ir:{cls}"))
