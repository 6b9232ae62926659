"""Fusion equals ranx 0.3.21's ``fuse`` (to 1e-9) for every method and normalisation Evret offers, on random runs
with ties, documents found by one run only and queries missing from one run; the fused order is trec_eval's."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

from evret_core.contracts.errors import EvretError
from evret_core.contracts.retrieve import RankedColumns
from evret_core.retrieve.fusion import METHODS, NORMS, FusionSettings, fuse_columns, fuse_runs

from .._paths import REPO

ranx = pytest.importorskip("ranx")

WEIGHTS = [0.3, 0.7]


def _trec_sorted(scores: dict[str, float]) -> dict[str, float]:
    return dict(sorted(scores.items(), key=lambda kv: (kv[1], kv[0]), reverse=True))


def random_run(seed: int, queries: int, depth: int, *, ties: bool, missing: float = 0.0) -> dict[str, dict[str, float]]:
    """``queries`` queries of 1..depth documents out of 3 x depth (so two runs overlap in part); scores with many
    ties (integers 0..4) or without; a share ``missing`` of the queries left out."""
    rng = np.random.default_rng(seed)
    run: dict[str, dict[str, float]] = {}
    for q in range(queries):
        if rng.random() < missing:
            continue
        m = int(rng.integers(1, depth + 1))
        docs = rng.choice(3 * depth, size=m, replace=False)
        scores = rng.integers(0, 5, m).astype(float) if ties else rng.normal(size=m) * 3
        run[f"q{q}"] = _trec_sorted({f"d{x}": float(s) for x, s in zip(docs, scores, strict=True)})
    return run


def ranx_fuse(runs: list[dict[str, dict[str, float]]], method: str, norm: str) -> dict[str, dict[str, float]]:
    """ranx's fused run. ranx refuses runs with different queries, and an empty ranking breaks its zmuv norm (its
    parallel loop then leaves every query of that run empty), so a query missing from a run is given to ranx as a
    ranking of one document no run has (``z``, score 0), dropped from ranx's result: it changes no other
    document's fused score, which is what a run that retrieved nothing contributes."""
    qids = list(dict.fromkeys(q for run in runs for q in run))
    params: dict[str, Any] = {"weights": WEIGHTS[:len(runs)]} if method in ("wsum", "wmnz") else {}
    full = [ranx.Run({q: run.get(q) or {"z": 0.0} for q in qids}) for run in runs]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numba's type-safety warnings inside ranx
        fused = ranx.fuse(full, norm=None if norm == "none" else norm, method=method, params=params)
    return {q: {doc: score for doc, score in d.items() if doc != "z"} for q, d in fused.to_dict().items()}


def assert_same(ours: dict[str, dict[str, float]], theirs: dict[str, dict[str, float]]) -> None:
    assert set(ours) == set(theirs)
    for qid, docs in theirs.items():
        assert set(ours[qid]) == set(docs), qid
        for doc, score in docs.items():
            assert ours[qid][doc] == pytest.approx(score, abs=1e-9, rel=0), (qid, doc)


CASES = [(m, n) for m in METHODS for n in NORMS]


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize(("method", "norm"), CASES, ids=[f"{m}-{n}" for m, n in CASES])
def test_equals_ranx_with_ties_and_missing_queries(method: str, norm: str, seed: int) -> None:
    """Up to 15 documents a query: ranx's sort keeps tied documents in the order given (its numba quicksort is an
    insertion sort below 16 elements), so even rank-based methods see the same ranks as Evret's trec_eval order."""
    a = random_run(seed, 40, 15, ties=True, missing=0.15)
    b = random_run(seed + 100, 40, 15, ties=True, missing=0.15)
    assert set(a) != set(b)
    weights = WEIGHTS if method in ("wsum", "wmnz") else None
    assert_same(fuse_runs([a, b], method=method, norm=norm, weights=weights), ranx_fuse([a, b], method, norm))


@pytest.mark.parametrize(("method", "norm"), CASES, ids=[f"{m}-{n}" for m, n in CASES])
def test_equals_ranx_on_deep_runs(method: str, norm: str) -> None:
    """100 documents a query: tied scores for the score-based methods; for rrf, isr and the rank norm, scores
    without ties (beyond 15 documents ranx orders tied documents by an unstable quicksort)."""
    ties = method not in ("rrf", "isr") and norm != "rank"
    a = random_run(7, 30, 100, ties=ties)
    b = random_run(8, 30, 100, ties=ties, missing=0.2)
    weights = WEIGHTS if method in ("wsum", "wmnz") else None
    assert_same(fuse_runs([a, b], method=method, norm=norm, weights=weights), ranx_fuse([a, b], method, norm))


def test_three_runs() -> None:
    runs = [random_run(s, 25, 12, ties=True, missing=0.1) for s in (11, 12, 13)]
    for method in ("rrf", "mnz", "max", "min"):
        assert_same(fuse_runs(runs, method=method, norm="min-max"), ranx_fuse(runs, method, "min-max"))


def test_fused_order_is_score_then_id_descending() -> None:
    a = random_run(21, 50, 40, ties=True)
    b = random_run(22, 50, 40, ties=True)
    for method in ("rrf", "sum", "max"):
        for qid, docs in fuse_runs([a, b], method=method).items():
            assert list(docs) == list(_trec_sorted(docs)), (method, qid)


def test_large_tie_blocks_are_ordered_too() -> None:
    """A block of more than 16 tied documents is ordered in Python, smaller ones by compare-and-swap passes."""
    a = {"q": {f"a{i:02d}": 1.0 for i in range(40)}}
    b = {"q": {f"b{i:02d}": 1.0 for i in range(5)}}
    fused = fuse_runs([a, b], method="sum", norm="none")["q"]
    assert list(fused) == list(_trec_sorted(fused))
    assert len(fused) == 45


def test_rrf_arithmetic_and_rank_order_by_hand() -> None:
    """Ranks come from each run's own order: score descending, ties by id descending (d2 before d1)."""
    a = {"q": {"d1": 2.0, "d2": 2.0, "d3": 1.0}}
    b = {"q": {"d3": 5.0}}
    fused = fuse_runs([a, b], method="rrf", rrf_k=10)["q"]
    assert fused == pytest.approx({"d3": 1 / 13 + 1 / 11, "d2": 1 / 11, "d1": 1 / 12}, abs=1e-15)
    assert list(fused) == ["d3", "d2", "d1"]


def test_columns_match_the_dict_path() -> None:
    a = random_run(31, 20, 10, ties=False)
    b = random_run(32, 20, 10, ties=False)
    qids = sorted(set(a) | set(b))

    def columns(run: dict[str, dict[str, float]]) -> list[RankedColumns]:
        return [RankedColumns(list(run.get(q, {})), list(run.get(q, {}).values())) for q in qids]

    settings = FusionSettings.check("mnz", "zmuv", n_runs=2)
    fused = fuse_columns([columns(a), columns(b)], settings)
    want = fuse_runs([a, b], method="mnz", norm="zmuv")
    for qid, (ids, scores) in zip(qids, fused, strict=True):
        assert list(ids) == list(want[qid])
        assert scores.tolist() == list(want[qid].values())


def test_a_document_twice_in_one_ranking_is_an_error() -> None:
    settings = FusionSettings.check("sum", "none")
    twice = [RankedColumns(["d1", "d2", "d1"], [3.0, 2.0, 1.0])]
    once = [RankedColumns(["d1"], [1.0])]
    with pytest.raises(EvretError, match="run 1 ranks document 'd1' more than once"):
        fuse_columns([twice, once], settings)


@pytest.mark.parametrize(("options", "message"), [
    ({"method": "combsum"}, "option method='combsum' is not a fusion method"),
    ({"norm": "zscore"}, "option norm='zscore' is not a normalisation"),
    ({"rrf_k": -1}, "option rrf_k must be a number >= 0"),
    ({"rrf_k": "60"}, "option rrf_k must be a number >= 0"),
    ({"method": "wsum", "weights": [1.0]}, "option weights has 1 values for 2 retrievers"),
    ({"method": "wsum", "weights": "1,2"}, "option weights must be a list of numbers"),
    ({"method": "wsum", "weights": [1.0, float("nan")]}, "option weights must be finite numbers"),
    ({"method": "rrf", "weights": [1.0, 2.0]}, "option weights is only used by method wsum or wmnz"),
])
def test_bad_options_name_the_option(options: dict[str, Any], message: str) -> None:
    with pytest.raises(EvretError, match=message.replace("(", r"\(").replace("[", r"\[")):
        FusionSettings.check(**options, n_runs=2, where="retriever 'hybrid'")


def test_weights_default_to_one_each() -> None:
    a = {"q": {"d1": 1.0, "d2": 0.0}}
    b = {"q": {"d2": 1.0}}
    assert fuse_runs([a, b], method="wsum", norm="none") == fuse_runs([a, b], method="sum", norm="none")


def test_the_docs_list_every_method_and_norm() -> None:
    page = (REPO / "docs" / "retrievers.md").read_text(encoding="utf-8")
    for name in (*METHODS, *NORMS):
        assert f"| `{name}` |" in page, name


def test_input_order_of_a_dict_does_not_matter() -> None:
    """Each run's ranking is its scores' order whatever the dict's order: already sorted (no sort), shuffled rows of
    similar lengths (a padded matrix sorted per row) and very uneven rows (one sort of the whole run)."""
    rng = np.random.default_rng(5)
    even = random_run(41, 30, 20, ties=True)
    uneven = {**random_run(42, 300, 2, ties=True), "long": {f"d{i}": float(i % 7) for i in range(5000)}}
    for run in (even, uneven):
        other = random_run(43, 30, 20, ties=True)
        shuffled = {q: dict(sorted(docs.items(), key=lambda _: rng.random())) for q, docs in run.items()}
        assert any(list(shuffled[q]) != list(run[q]) for q in run)
        for method in ("rrf", "sum"):
            want = fuse_runs([run, other], method=method)
            got = fuse_runs([shuffled, other], method=method)
            assert [list(d.items()) for d in got.values()] == [list(d.items()) for d in want.values()]
