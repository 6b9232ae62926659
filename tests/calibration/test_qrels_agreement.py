"""Agreement of two qrels: the pairs counted, the bootstrap over queries (not pairs), the leaderboard level."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from evret_core.calibration.qrels_agreement import pair_table, qrels_agreement, query_weights
from evret_core.contracts.errors import EvretError


def _qrels(seed: int, queries: int = 12, docs: int = 30) -> tuple[dict, dict]:
    rng = np.random.default_rng(seed)
    ref: dict[str, dict[str, float]] = {}
    jud: dict[str, dict[str, float]] = {}
    for q in range(queries):
        for d in range(docs):
            g = int(rng.integers(0, 4))
            ref.setdefault(f"q{q}", {})[f"d{d}"] = g
            if rng.random() < 0.9:
                jud.setdefault(f"q{q}", {})[f"d{d}"] = int(np.clip(g + rng.integers(-1, 2) * (q % 3 > 0), 0, 3))
    jud["q0"]["extra"] = 1
    return ref, jud


def test_pairs_and_only_counts() -> None:
    ref = {"a": {"x": 0, "y": 2}, "b": {"z": 1}}
    jud = {"a": {"x": 1, "w": 0}, "c": {"v": 3}}
    table = pair_table(ref, jud)
    assert table.queries == ["a"] and table.labels == [0.0, 1.0]
    assert (table.only_reference, table.only_judged) == (2, 2)
    assert table.per_query.tolist() == [[[0, 1], [0, 0]]]
    with pytest.raises(EvretError, match="share no judged pair"):
        pair_table({"a": {"x": 1}}, {"a": {"y": 1}})


def test_point_values_are_the_pooled_pairs() -> None:
    ref, jud = _qrels(1)
    out = qrels_agreement(ref, jud, n_resamples=50)
    pairs = [(ref[q][d], jud[q][d]) for q in ref for d in ref[q] if d in jud.get(q, {})]
    r, j = np.array(pairs).T
    assert out["pairs"] == len(pairs) and out["queries"] == 12 and out["only_judged"] == 1
    assert out["cohen_kappa"]["value"] == pytest.approx(cohen_kappa_score(r, j), abs=1e-12)
    assert out["weighted_kappa"]["quadratic"]["value"] == pytest.approx(
        cohen_kappa_score(r, j, weights="quadratic"), abs=1e-12)
    assert out["binary"]["2"]["kappa"]["value"] == pytest.approx(cohen_kappa_score(r >= 2, j >= 2), abs=1e-12)
    assert out["binary"]["2"]["reference_positive"] == int(np.sum(r >= 2))
    assert sum(map(sum, out["confusion"]["matrix"])) == len(pairs)
    assert out["leaderboard"] is None
    assert out["bootstrap"] == {"unit": "query", "n_resamples": 50, "confidence_level": 0.95, "seed": 0}


def test_bootstrap_resamples_queries_not_pairs() -> None:
    """Each query's pairs entered twice (as two documents of the same query) leave the query's share of every
    resample as it was, so every figure and interval of the ratios is unchanged; resampling pairs would narrow
    the intervals."""
    ref, jud = _qrels(2)
    doubled_ref = {q: {**d, **{k + "#2": v for k, v in d.items()}} for q, d in ref.items()}
    doubled_jud = {q: {**d, **{k + "#2": v for k, v in d.items()}} for q, d in jud.items()}
    one, two = qrels_agreement(ref, jud, seed=3), qrels_agreement(doubled_ref, doubled_jud, seed=3)
    for key in ("exact_agreement", "cohen_kappa", "krippendorff_alpha"):
        assert two[key]["value"] == pytest.approx(one[key]["value"], abs=1e-3 if key == "krippendorff_alpha" else 1e-12)
    for key in ("exact_agreement", "cohen_kappa"):
        assert two[key]["interval"] == pytest.approx(one[key]["interval"], abs=1e-12)
    assert two["weighted_kappa"]["linear"]["interval"] == pytest.approx(
        one["weighted_kappa"]["linear"]["interval"], abs=1e-12)


def test_weights_draw_queries_and_repeat_with_the_seed() -> None:
    w = query_weights(7, 200, seed=5)
    assert w.shape == (200, 7) and (w.sum(axis=1) == 7).all()
    assert (w == query_weights(7, 200, seed=5)).all() and not (w == query_weights(7, 200, seed=6)).all()


def test_seeded_runs_repeat_and_intervals_contain_the_values() -> None:
    ref, jud = _qrels(4)
    runs = _runs(ref, 4)
    a = qrels_agreement(ref, jud, runs, ["ndcg@10", "precision@5"], seed=9, n_resamples=300)
    assert a == qrels_agreement(ref, jud, runs, ["ndcg@10", "precision@5"], seed=9, n_resamples=300)
    figures = [a["exact_agreement"], a["cohen_kappa"], a["krippendorff_alpha"], *a["weighted_kappa"].values(),
               *(b["kappa"] for b in a["binary"].values())]
    for board in a["leaderboard"].values():
        figures += [board[k] for k in ("kendall_tau", "tau_ap", "spearman_rho", "swap_rate")]
    for fig in figures:
        low, high = fig["interval"]
        assert low - 1e-12 <= fig["value"] <= high + 1e-12, fig


def _runs(qrels: dict, n: int) -> dict[str, dict[str, dict[str, float]]]:
    """Runs whose quality falls with their index: each ranks the documents by grade plus more noise."""
    rng = np.random.default_rng(0)
    return {f"s{i}": {q: {d: g + rng.normal(0, 0.5 + i) for d, g in docs.items()} for q, docs in qrels.items()}
            for i in range(n)}


def test_leaderboard_scores_each_system_under_both_qrels() -> None:
    from evret_core.metrics.engine import evaluate_run

    ref, jud = _qrels(5)
    runs = _runs(ref, 3)
    out = qrels_agreement(ref, jud, runs, ["ndcg@10"], n_resamples=20)
    board = out["leaderboard"]["ndcg@10"]
    for system in board["systems"]:
        assert system["reference"] == pytest.approx(evaluate_run(ref, runs[system["run"]], ["ndcg@10"])["ndcg@10"])
        assert system["judged"] == pytest.approx(evaluate_run(jud, runs[system["run"]], ["ndcg@10"],
                                                              complete=True)["ndcg@10"])
    same = qrels_agreement(ref, ref, runs, ["ndcg@10"], n_resamples=20)["leaderboard"]["ndcg@10"]
    assert same["kendall_tau"]["value"] == 1.0 and same["tau_ap"]["value"] == 1.0
    assert same["swap_rate"]["value"] == 0.0


def test_degenerate_inputs_are_errors() -> None:
    ref, jud = _qrels(6)
    with pytest.raises(EvretError, match="at least 2 runs"):
        qrels_agreement(ref, jud, _runs(ref, 1))
    with pytest.raises(EvretError, match="none of the 12 queries"):
        qrels_agreement(ref, jud, {"a": {"zz": {"d": 1.0}}, "b": {"q1": {"d1": 1.0}}})


def test_constant_raters_alpha_is_null_with_a_reason() -> None:
    ref = {"a": {"x": 1, "y": 1}, "b": {"z": 1}}
    out = qrels_agreement(ref, ref, n_resamples=20)
    assert out["cohen_kappa"]["value"] == 0.0
    assert out["krippendorff_alpha"]["value"] is None and "same grade" in out["krippendorff_alpha"]["reason"]
    assert out["binary"] == {}


def test_leaderboard_statistics_in_chunks_of_resamples_equal_one_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    import evret_core.calibration.qrels_agreement as qa

    ref, jud = _qrels(7)
    runs = _runs(ref, 5)
    whole = qa.qrels_agreement(ref, jud, runs, ["ndcg@10"], n_resamples=101)
    monkeypatch.setattr(qa, "_CELLS", 25 * 7)  # 7 resamples a chunk, the last one shorter
    assert qa.qrels_agreement(ref, jud, runs, ["ndcg@10"], n_resamples=101) == whole
