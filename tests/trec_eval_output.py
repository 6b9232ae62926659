"""Read trec_eval's printed output (``measure<TAB>query<TAB>value``) and map its measure names to Evret's."""

from __future__ import annotations

import re
from pathlib import Path

from evret_core.testing.shared_data import shared_data

_CUT = re.compile(r"^(P|recall|success|ndcg_cut|map_cut|unj)_(\d+)$")
_CUT_FAMILY = {"P": "precision", "recall": "recall", "success": "hit_rate", "ndcg_cut": "ndcg", "map_cut": "ap",
               "unj": "unjudged"}
_PLAIN = {
    "map": "ap", "ndcg": "ndcg", "Rprec": "r_precision", "bpref": "bpref", "recip_rank": "mrr",
    "num_rel_ret": "num_rel_ret", "num_rel": "num_rel", "num_ret": "num_ret", "set_P": "precision",
    "set_recall": "recall", "set_F": "f1", "rbp": "rbp", "rbp_resid": "rbp_residual",
}
COUNTS = {"num_rel_ret", "num_rel", "num_ret"}


def evret_name(trec_measure: str) -> str | None:
    """The Evret metric that equals a trec_eval measure, or None when Evret does not claim it."""
    match = _CUT.match(trec_measure)
    if match:
        return f"{_CUT_FAMILY[match.group(1)]}@{match.group(2)}"
    return _PLAIN.get(trec_measure)


def parse_output(path: Path) -> dict[str, dict[str, str]]:
    """``{query_or_all: {trec_measure: printed value}}`` from a trec_eval output file."""
    table: dict[str, dict[str, str]] = {}
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        measure, query, value = (f.strip() for f in line.split("\t"))
        table.setdefault(query, {})[measure] = value
    return table


def shared_dir() -> Path:
    """../shared next to the repository root; skips outside CI when it is absent, fails in CI."""
    return shared_data(what="the shared folder with trec_eval's test suite")
