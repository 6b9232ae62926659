"""Unjudged documents: judged@k (ir_measures' Judged@k), unjudged@k (trec_eval 10.0's unj_k, also checked on
trec_eval's own outputs by test_metrics_trec_eval.py) and the condensed measures against trec_eval -J outputs."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evret_core import evaluate_rankings, evaluate_run, read_qrels, read_run

_spec = importlib.util.spec_from_file_location("trec_eval_output", Path(__file__).parents[1] / "trec_eval_output.py")
assert _spec and _spec.loader
trec_eval_output = importlib.util.module_from_spec(_spec)
sys.modules["trec_eval_output"] = trec_eval_output
_spec.loader.exec_module(trec_eval_output)

DATA = Path(__file__).parent / "data"
_CUT = re.compile(r"^(P|recall|ndcg_cut|map_cut)_(\d+)$")
_FAMILY = {"P": "precision_condensed", "recall": "recall_condensed", "ndcg_cut": "ndcg_condensed",
           "map_cut": "ap_condensed"}
_PLAIN = {"map": "ap_condensed", "ndcg": "ndcg_condensed", "recip_rank": "mrr_condensed"}


def condensed_name(measure: str) -> str | None:
    match = _CUT.match(measure)
    if match:
        return f"{_FAMILY[match.group(1)]}@{match.group(2)}"
    return _PLAIN.get(measure)


J_CASES = [
    ("out.test.J.cuts.q", "qrels.test", "results.test", {}),
    ("out.comment.test.J.cuts.q", "qrels.comment.test", "results.comment.test", {}),
    ("out.test.J.cuts.ql", "qrels.rel_level", "results.test", {"relevance_level": 2}),
]


@pytest.mark.parametrize("case", J_CASES, ids=[c[0] for c in J_CASES])
def test_condensed_measures_match_trec_eval_minus_j(case: tuple[str, str, str, dict[str, Any]]) -> None:
    out, qrels_file, run_file, options = case
    base = trec_eval_output.shared_dir() / "datasets" / "trec_eval"
    expected = trec_eval_output.parse_output(DATA / out)
    names = sorted({n for row in expected.values() for m in row if (n := condensed_name(m))})
    assert len(names) >= 20
    qrels, run = read_qrels(base / qrels_file), read_run(base / run_file)
    per_query = evaluate_run(qrels, run, names, per_query=True, **options)
    bad, checked = [], 0
    for qid, row in expected.items():
        for measure, want in row.items():
            name = condensed_name(measure)
            if name is None:
                continue
            column = [values[name] for values in per_query.values()]
            got = sum(column) / len(column) if qid == "all" else per_query[qid][name]
            checked += 1
            if f"{got:.4f}" != want:
                bad.append(f"{qid} {measure}: evret {got:.4f}, trec_eval -J {want}")
    assert checked >= 100
    assert not bad, "\n".join(bad[:30])


def test_condensing_changes_the_scores_of_this_data() -> None:
    """The -J files test something: on qrels.test, condensing moves documents up (the runs have unjudged ones)."""
    base = trec_eval_output.shared_dir() / "datasets" / "trec_eval"
    qrels, run = read_qrels(base / "qrels.test"), read_run(base / "results.test")
    scores = evaluate_run(qrels, run, ["precision@100", "precision_condensed@100", "ap", "ap_condensed"])
    assert scores["precision_condensed@100"] > scores["precision@100"]
    assert scores["ap_condensed"] > scores["ap"]


QRELS = {"q": {"r1": 2, "r2": 1, "n1": 0, "p1": -1}}


@pytest.mark.parametrize(("ranking", "k", "judged", "unjudged"), [
    # u = not in the qrels; p1 judged -1: judged for ir_measures, unjudged for trec_eval
    (["r1", "u1", "n1", "u2", "r2"], 5, 3 / 5, 2 / 5),
    (["r1", "u1", "n1"], 5, 2 / 3, 1 / 5),      # judged@k over min(k, retrieved); unj_k over k
    (["p1", "u1", "r1"], 3, 2 / 3, 2 / 3),      # a negative grade: judged, but unjudged for trec_eval
    (["u1", "u2"], 1, 0.0, 1.0),
    ([], 10, 0.0, 0.0),                         # nothing retrieved: no judged share, nothing unjudged
])
def test_judged_and_unjudged_by_hand(ranking: list[str], k: int, judged: float, unjudged: float) -> None:
    scores = evaluate_rankings(QRELS, {"q": ranking}, [f"judged@{k}", f"unjudged@{k}"])
    assert scores == pytest.approx({f"judged@{k}": judged, f"unjudged@{k}": unjudged}, abs=1e-15)


def test_condensed_by_hand() -> None:
    """u1, u2 and p1 (judged -1, trec_eval's unjudged-in-pool) leave the ranking: r1 n1 r2 remain, in order."""
    ranking = ["u1", "r1", "p1", "u2", "n1", "r2"]
    scores = evaluate_rankings(QRELS, {"q": ranking}, ["precision_condensed@2", "mrr_condensed", "ap_condensed",
                                                        "recall_condensed@3", "ndcg_condensed@3"])
    dcg = 2 / np.log2(2) + 1 / np.log2(4)
    assert scores == pytest.approx({"precision_condensed@2": 1 / 2, "mrr_condensed": 1.0,
                                    "ap_condensed": (1 + 2 / 3) / 2, "recall_condensed@3": 1.0,
                                    "ndcg_condensed@3": dcg / (2 + 1 / np.log2(3))}, abs=1e-12)


def test_judged_equals_ir_measures_on_trec_eval_data() -> None:
    """ir_measures' Judged@k, written out from its definition (judged documents of the top min(k, retrieved), any
    grade), on every query of trec_eval's test run; ties ranked by trec_eval's order, as Evret ranks a run."""
    base = trec_eval_output.shared_dir() / "datasets" / "trec_eval"
    qrels, run = read_qrels(base / "qrels.test"), read_run(base / "results.test")
    got = evaluate_run(qrels, run, ["judged@10", "judged@100", "unjudged@10"], per_query=True)
    for qid, values in got.items():
        ranked = sorted(run[qid].items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
        for k in (10, 100):
            top = [doc for doc, _ in ranked[:k]]
            assert values[f"judged@{k}"] == sum(doc in qrels[qid] for doc in top) / len(top)
        unj = sum(doc not in qrels[qid] or qrels[qid][doc] < 0 for doc, _ in ranked[:10]) / 10
        assert values["unjudged@10"] == unj
