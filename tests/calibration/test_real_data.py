"""Calibration on real data: SciFact labels derived from its qrels, and a cascade whose first stage settles most.

Reads ../shared/datasets/scifact. Outside CI a missing folder skips with the reason; in CI it fails.
"""

from __future__ import annotations

import pytest

from evret_core import EvaluationDataset, QueryExample
from evret_core.calibration import calibrate_judge, derive_labels
from evret_core.calibration.calibrate import unit_verdicts
from evret_core.judge.cascade import CascadeJudge
from evret_core.testing.shared_data import shared_data


@pytest.fixture(scope="module")
def labels() -> list:  # type: ignore[type-arg]
    scifact = shared_data("datasets", "scifact", "corpus.jsonl", what="SciFact").parent
    ids = EvaluationDataset.from_beir(scifact, split="test")
    corpus = ids.corpus or {}
    queries = ids.queries[:40]
    text = EvaluationDataset(queries=[
        QueryExample(query_id=q.query_id, query_text=q.query_text,
                     expected_answers=[corpus[d]["text"] for d in q.relevance]) for q in queries])
    others = sorted(corpus)[:200]
    # each query "retrieves" its gold abstracts among five others (different per query)
    retrieved = {q.query_id: [(d, corpus[d]["text"]) for d in
                              [*others[i * 5:(i + 1) * 5], *q.relevance]] for i, q in enumerate(queries)}
    return derive_labels(text, {q.query_id: q.relevance for q in queries}, retrieved)


def test_exact_agrees_perfectly_with_ids_and_beats_the_baselines(labels: list) -> None:  # type: ignore[type-arg]
    exact = calibrate_judge("exact", labels, n_resamples=200)
    assert exact.agreement.n == len(labels) and exact.agreement.kappa == 1.0
    assert exact.beats_baselines
    overlap = calibrate_judge("token-overlap", labels, n_resamples=200)
    assert overlap.agreement.kappa > 0.9 and overlap.best is not None


def test_cascade_on_real_abstracts_matches_its_last_stage_with_fewer_calls(labels: list) -> None:  # type: ignore[type-arg]
    cascade = CascadeJudge([{"name": "token-overlap", "band": [0.2, 0.9], "query_boost": False}, "exact"])
    got = unit_verdicts(cascade, labels)
    assert got == [item.label for item in labels]
    stats = cascade.stats()
    assert stats["last_judge_fraction"] < 0.34 and stats["unmeasured"] == 0
