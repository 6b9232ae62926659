"""The aggregates of a conversation run, from its per-turn values: per form (means, intervals, counts), the
differences between forms (intervals, paired tests, Holm), per turn index, per conversation and per tag value.

``unit="conversation"`` (the default) keeps means over turns but resamples and flips whole conversations
(:mod:`evret_core.statistics.clustered`): turns of one conversation are not independent. ``unit="turn"`` uses the
per-turn bootstrap and tests of :mod:`evret_core.statistics.inference` (optimistic when turns of a conversation
go together).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np

from evret_core.contracts.errors import EvretError
from evret_core.statistics.clustered import (
    cluster_bootstrap_intervals,
    cluster_paired_p_value,
    number_clusters,
)
from evret_core.statistics.inference import (
    TESTS,
    bootstrap_intervals,
    holm_bonferroni,
    natural_order,
    paired_p_value,
)

__all__ = ["UNITS", "StatisticsSettings", "TurnColumns", "aggregate", "form_pairs"]

UNITS = ("conversation", "turn")
"""What intervals and tests resample: whole conversations (default) or turns."""

TOP = 5  # gained / lost turns and worst conversations listed


@dataclass(frozen=True)
class StatisticsSettings:
    """How a conversation run's statistics are made."""

    unit: str = "conversation"
    test: str = "randomization"
    all_pairs: bool = False
    confidence_level: float = 0.95
    n_resamples: int = 1000
    test_resamples: int = 10000
    seed: int = 0
    min_slice_size: int = 10
    alpha: float = 0.05

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise EvretError(f"unit must be {' or '.join(UNITS)}, got {self.unit!r}")
        if self.test not in TESTS:
            raise EvretError(f"unknown test {self.test!r}; use one of {', '.join(TESTS)}")


@dataclass
class TurnColumns:
    """A run's labelled turns in file order: ids, conversation, 1-based index, tags, and per form and metric the
    per-turn values (NaN where the form has no text for the turn)."""

    turn_ids: list[str]
    conversation_ids: list[str]
    indexes: list[int]
    tags: list[dict[str, str]]
    values: dict[str, dict[str, np.ndarray]]

    def clusters(self, rows: np.ndarray | None = None) -> np.ndarray:
        """The conversation number of each turn (of ``rows`` when given), numbered from 0 in order of appearance."""
        ids = self.conversation_ids if rows is None else [self.conversation_ids[i] for i in rows]
        return number_clusters(ids)[0]


def form_pairs(forms: Sequence[str], baseline: str, all_pairs: bool) -> list[tuple[str, str]]:
    """The (a, b) pairs whose b - a is reported: every form against the baseline, or every pair of forms."""
    if all_pairs:
        return list(combinations(forms, 2))
    return [(baseline, form) for form in forms if form != baseline]


def _mean(values: np.ndarray) -> float | None:
    finite = values[np.isfinite(values)]
    return float(finite.mean()) if finite.size else None


def _intervals(columns: dict[str, np.ndarray], clusters: np.ndarray, settings: StatisticsSettings,
               unit: str | None = None) -> dict[str, list[float]]:
    """Each column's interval over its finite values, by ``unit`` (the settings' when None)."""
    if (unit or settings.unit) == "conversation":
        return cluster_bootstrap_intervals(columns, clusters, settings.confidence_level, settings.n_resamples,
                                           settings.seed)
    out: dict[str, list[float]] = {}
    for name, values in columns.items():
        finite = values[np.isfinite(values)]
        if finite.size:
            out.update(bootstrap_intervals({name: finite}, settings.confidence_level, settings.n_resamples,
                                           settings.seed))
    return out


def _p_value(a: np.ndarray, b: np.ndarray, clusters: np.ndarray, settings: StatisticsSettings) -> float | None:
    """The paired test's p over turns measured under both; None with fewer than 2 units to test."""
    if settings.unit == "conversation":
        if np.unique(clusters).size < 2:
            return None
        return cluster_paired_p_value(a, b, clusters, settings.test, settings.test_resamples, settings.seed)
    if a.size < 2:
        return None
    return paired_p_value(a, b, settings.test, settings.test_resamples, settings.seed)


def aggregate(columns: TurnColumns, forms: Sequence[str], metrics: Sequence[str], baseline: str,
              settings: StatisticsSettings) -> dict[str, Any]:
    """Every section of a conversation run's summary (the keys of its results file), from ``columns``."""
    clusters = columns.clusters()
    conversations = np.asarray(columns.conversation_ids, dtype=object)
    scores: dict[str, dict[str, float]] = {}
    intervals: dict[str, dict[str, list[float]]] = {}
    counts: dict[str, dict[str, int]] = {}
    for form in forms:
        values = columns.values[form]
        present = np.isfinite(values[metrics[0]])
        counts[form] = {"turns": int(present.sum()), "conversations": int(len(set(conversations[present])))}
        scores[form] = {m: v for m in metrics if (v := _mean(values[m])) is not None}
        intervals[form] = _intervals({m: values[m] for m in metrics}, clusters, settings)
    return {
        "scores": scores, "intervals": intervals, "n": counts,
        "differences": differences(columns, forms, metrics, baseline, settings),
        "by_turn_index": by_turn_index(columns, forms, metrics, baseline, settings),
        **per_conversation(columns, forms, metrics, baseline, settings),
        "slices": slices(columns, forms, metrics, settings),
    }


def differences(columns: TurnColumns, forms: Sequence[str], metrics: Sequence[str], baseline: str,
                settings: StatisticsSettings) -> list[dict[str, Any]]:
    """b - a for every reported pair and metric, over the turns measured under both, Holm-adjusted together."""
    clusters = columns.clusters()
    out: list[dict[str, Any]] = []
    for metric in metrics:
        for a, b in form_pairs(forms, baseline, settings.all_pairs):
            x, y = columns.values[a][metric], columns.values[b][metric]
            both = np.isfinite(x) & np.isfinite(y)
            diff = np.where(both, y - x, np.nan)
            rows = np.flatnonzero(both)
            entry: dict[str, Any] = {"a": a, "b": b, "metric": metric, "mean": None, "interval": None,
                                     "p_value": None, "p_adjusted": None, "significant": False,
                                     "n_turns": int(rows.size),
                                     "n_conversations": int(len({columns.conversation_ids[i] for i in rows})),
                                     "gained": [], "lost": []}
            if rows.size:
                d = diff[rows]
                entry["mean"] = float(d.mean())
                entry["interval"] = _intervals({"d": diff}, clusters, settings).get("d")
                entry["p_value"] = _p_value(x[rows], y[rows], clusters[rows], settings)
                order = np.argsort(d, kind="stable")
                entry["gained"] = [{"turn_id": columns.turn_ids[rows[j]], "delta": float(d[j])}
                                   for j in order[::-1][:TOP] if d[j] > 0]
                entry["lost"] = [{"turn_id": columns.turn_ids[rows[j]], "delta": float(d[j])}
                                 for j in order[:TOP] if d[j] < 0]
            out.append(entry)
    tested = [e for e in out if e["p_value"] is not None]
    for entry, adjusted in zip(tested, holm_bonferroni([e["p_value"] for e in tested]), strict=True):
        entry["p_adjusted"] = adjusted
        entry["significant"] = bool(adjusted < settings.alpha)
    return out


def by_turn_index(columns: TurnColumns, forms: Sequence[str], metrics: Sequence[str], baseline: str,
                  settings: StatisticsSettings) -> dict[str, dict[str, dict[str, Any]]]:
    """Per form and turn index (sorted numerically): n, means, intervals (a conversation has one turn per index:
    the plain bootstrap), ``small``, and the difference from the baseline form with its interval."""
    indexes = np.asarray(columns.indexes, dtype=np.int64)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for form in forms:
        out[form] = {}
        for index in sorted(set(columns.indexes)):
            rows = indexes == index
            present = rows & np.isfinite(columns.values[form][metrics[0]])
            if not present.any():
                continue
            sub = {m: columns.values[form][m][present] for m in metrics}
            cell: dict[str, Any] = {
                "n": int(present.sum()), "scores": {m: float(v.mean()) for m, v in sub.items()},
                "intervals": bootstrap_intervals(sub, settings.confidence_level, settings.n_resamples, settings.seed),
                "small": bool(present.sum() < settings.min_slice_size)}
            if form != baseline:
                both = present & np.isfinite(columns.values[baseline][metrics[0]])
                if both.any():
                    diff = {m: columns.values[form][m][both] - columns.values[baseline][m][both] for m in metrics}
                    spans = bootstrap_intervals(diff, settings.confidence_level, settings.n_resamples, settings.seed)
                    cell["difference"] = {m: {"mean": float(d.mean()), "interval": spans[m], "n": int(both.sum())}
                                          for m, d in diff.items()}
            out[form][str(index)] = cell
    return out


def per_conversation(columns: TurnColumns, forms: Sequence[str], metrics: Sequence[str], baseline: str,
                     settings: StatisticsSettings) -> dict[str, Any]:
    """``conversation_means`` (each conversation's mean over its measured turns, then the mean over conversations,
    each counting once, with the plain bootstrap over conversations) and the ``worst_conversations`` under the
    baseline form by the first metric."""
    clusters = columns.clusters()
    order = list(dict.fromkeys(columns.conversation_ids))
    n_clusters = len(order)
    means: dict[str, dict[str, dict[str, Any]]] = {}
    per: dict[str, dict[str, np.ndarray]] = {}
    for form in forms:
        means[form], per[form] = {}, {}
        for metric in metrics:
            values = columns.values[form][metric]
            finite = np.isfinite(values)
            sums = np.bincount(clusters[finite], weights=values[finite], minlength=n_clusters)
            counts = np.bincount(clusters[finite], minlength=n_clusters)
            with np.errstate(invalid="ignore", divide="ignore"):
                per[form][metric] = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
            measured = per[form][metric][counts > 0]
            if measured.size:
                interval = bootstrap_intervals({metric: measured}, settings.confidence_level, settings.n_resamples,
                                               settings.seed)[metric]
                means[form][metric] = {"value": float(measured.mean()), "interval": interval,
                                       "conversations": int(measured.size)}
    turns = np.bincount(clusters, minlength=n_clusters)
    first = per[baseline][metrics[0]]
    ranked = [i for i in np.argsort(np.where(np.isfinite(first), first, np.inf), kind="stable") if np.isfinite(first[i])]
    worst = [{"conversation_id": order[i], "turns": int(turns[i]),
              **{m: float(per[baseline][m][i]) for m in metrics if np.isfinite(per[baseline][m][i])}}
             for i in ranked[:TOP]]
    return {"conversation_means": means, "worst_conversations": worst}


def slices(columns: TurnColumns, forms: Sequence[str], metrics: Sequence[str],
           settings: StatisticsSettings) -> dict[str, dict[str, dict[str, dict[str, Any]]]]:
    """Per tag, value (natural order) and form: n turns, conversations, means, intervals (by the run's unit),
    ``small`` (fewer than ``min_slice_size`` turns)."""
    keys = sorted({key for tags in columns.tags for key in tags})
    out: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
    for key in keys:
        groups: dict[str, list[int]] = {}
        for i, tags in enumerate(columns.tags):
            if key in tags:
                groups.setdefault(str(tags[key]), []).append(i)
        out[key] = {}
        for value in natural_order(groups):
            rows = np.asarray(groups[value], dtype=np.int64)
            clusters = columns.clusters(rows)
            out[key][value] = {}
            for form in forms:
                sub = {m: columns.values[form][m][rows] for m in metrics}
                present = np.isfinite(sub[metrics[0]])
                if not present.any():
                    continue
                out[key][value][form] = {
                    "n": int(present.sum()),
                    "conversations": int(len({columns.conversation_ids[i] for i in rows[present]})),
                    "scores": {m: float(v[present].mean()) for m, v in sub.items()},
                    "intervals": _intervals(sub, clusters, settings),
                    "small": bool(present.sum() < settings.min_slice_size),
                }
    return out
