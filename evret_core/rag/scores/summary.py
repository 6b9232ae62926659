"""Aggregates of a RAG run: means and bootstrap intervals per condition, behaviour rates, attribution, paired
differences between conditions, slices by tag, and what could not be measured.

When the questions are conversation turns (``RagResults.clustered``), the intervals resample whole conversations
and each condition difference gets the conversation-clustered paired randomization test's ``p_value``
(:mod:`evret_core.statistics.clustered`); the means stay over turns."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from evret_core.rag.scores.relevance import unmeasured_relevance
from evret_core.results.rag_results import (
    ATTRIBUTIONS,
    CLARIFY_RATES,
    DERIVED_SCORES,
    Difference,
    QuestionOutcome,
    RagResults,
    asks_back,
    outcome_value,
)
from evret_core.statistics.clustered import (
    cluster_bootstrap_intervals,
    cluster_paired_p_value,
    number_clusters,
)
from evret_core.statistics.inference import bootstrap_interval

GENERATION_METRICS = ("exact", "f1", "correct", "behaviour_ok", "refused", "answer_judge", "answer_relevance",
                      "groundedness", "faithfulness", "contradiction_rate", "citation_precision", "citation_recall",
                      "history_support_rate")
HISTORY_METRICS = ("history_support_rate",)
"""Scores only an answer judged against a conversation's history has: a run without one has neither their row
nor their count, so single-question results stay as they were."""
DIFFERENCE_METRICS = ("exact", "f1", "correct")
SLICE_METRICS = ("exact", "f1", "correct", "refused")


def _expected(behaviours: tuple[str, ...]) -> Callable[[QuestionOutcome, str], bool]:
    return lambda q, c: q.conditions[c].expected_behaviour in behaviours


# derived rates: name -> (the questions it covers, the per-question value it averages); results files are checked
# against the same table (evret_core.results.rag_results.DERIVED_SCORES); clarify_rate (over the questions expected
# to ask the user back) and wrong_clarify_rate (over those expected to be answered) only in a run that asks back
_SUBSETS: dict[str, tuple[Callable[[QuestionOutcome, str], bool], str]] = {
    name: (_expected(behaviours), score) for name, (behaviours, score) in DERIVED_SCORES.items()}

DERIVED_METRICS = tuple(_SUBSETS)


def _values(outcomes: list[QuestionOutcome], condition: str, metric: str,
            keep: Callable[[QuestionOutcome, str], bool] | None = None) -> list[float]:
    return [v for v, _ in _measured(outcomes, condition, metric, keep)]


def _measured(outcomes: list[QuestionOutcome], condition: str, metric: str,
              keep: Callable[[QuestionOutcome, str], bool] | None = None) -> list[tuple[float, str]]:
    """Each value of ``metric`` under ``condition`` with its question's conversation (its id when none)."""
    out = []
    for q in outcomes:
        oc = q.conditions.get(condition)
        if oc is None or (keep is not None and not keep(q, condition)):
            continue
        value = outcome_value(oc, metric)
        if value is not None:
            out.append((float(value), q.conversation_id or q.question_id))
    return out


def _interval(values: list[float], clusters: list[str] | None, level: float, n_resamples: int,
              seed: int) -> list[float]:
    """The percentile bootstrap interval of the mean of ``values``: questions resampled, or, with ``clusters``
    (each value's conversation), whole conversations."""
    if clusters is None:
        return list(bootstrap_interval(values, level, n_resamples, seed))
    numbered, _ = number_clusters(clusters)
    return cluster_bootstrap_intervals({"v": np.asarray(values, dtype=np.float64)}, numbered, level, n_resamples,
                                       seed)["v"]


def summarise(results: RagResults, retrieval: dict[str, Any], n_resamples: int, seed: int,
              extra_metrics: Sequence[str] = ()) -> None:
    """Fill the summary sections of ``results`` (in place) from its per-question outcomes; ``extra_metrics`` are the
    score names of plugins' RAG scores (after the built-in ones)."""
    level = results.confidence_level
    outcomes = list(results.per_question.values())
    subsets = {name: subset for name, subset in _SUBSETS.items() if name not in CLARIFY_RATES or asks_back(outcomes)}
    clustered = results.clustered
    for condition in results.conditions:
        means: dict[str, float | None] = {}
        intervals: dict[str, list[float]] = {}
        counts: dict[str, int] = {}
        columns: dict[str, tuple[Callable[[QuestionOutcome, str], bool] | None, str]] = {
            m: (None, m) for m in GENERATION_METRICS}
        columns.update({name: (keep, metric) for name, (keep, metric) in subsets.items()})
        columns.update({m: (None, m) for m in extra_metrics if m not in columns})
        for name, (keep, metric) in columns.items():
            measured = _measured(outcomes, condition, metric, keep)
            values = [v for v, _ in measured]
            if not values and metric in HISTORY_METRICS and not any(
                    metric in q.conditions[condition].scores for q in outcomes if condition in q.conditions):
                continue
            counts[name] = len(values)
            if not values:
                # an optional part that is off has no row; one that is on but measured nothing shows n/a (n=0)
                if metric in ("answer_judge", "answer_relevance") and not any(
                        metric in q.conditions[condition].scores for q in outcomes if condition in q.conditions):
                    continue
                means[name] = None
                continue
            means[name] = float(np.mean(values))
            intervals[name] = _interval(values, [c for _, c in measured] if clustered else None, level,
                                        n_resamples, seed)
        results.generation[condition] = means
        results.generation_intervals[condition] = intervals
        results.generation_n[condition] = counts
    _attribute(results)
    results.differences = _differences(results, n_resamples, seed)
    results.slices = _slices(outcomes, results.conditions)
    results.unmeasured = _unmeasured(outcomes, results.conditions, retrieval)


def _attribute(results: RagResults) -> None:
    if not {"gold", "retrieved"} <= set(results.conditions):
        return
    counts = dict.fromkeys(ATTRIBUTIONS, 0)
    for q in results.per_question.values():
        gold, got = q.conditions["gold"].correct, q.conditions["retrieved"].correct
        if gold is None or got is None:
            label = "unmeasured"
        elif not gold:
            label = "generator_failure"
        elif got:
            label = "both_right"
        elif q.gold_retrieved is None:
            label = "unmeasured"
        else:
            label = "context_noise" if q.gold_retrieved else "retrieval_failure"
        q.attribution = label
        counts[label] += 1
    results.attribution = counts


def _differences(results: RagResults, n_resamples: int, seed: int) -> list[Difference]:
    out = []
    names = results.conditions
    clustered = results.clustered
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            for metric in DIFFERENCE_METRICS:
                pairs = [(q.conditions[a].scores.get(metric), q.conditions[b].scores.get(metric),
                          q.conversation_id or q.question_id) for q in results.per_question.values()]
                kept = [(float(x), float(y), c) for x, y, c in pairs if x is not None and y is not None]
                diffs = [y - x for x, y, _ in kept]
                if not diffs:
                    continue
                clusters = [c for _, _, c in kept] if clustered else None
                low, high = _interval(diffs, clusters, results.confidence_level, n_resamples, seed)
                p_value = None
                if clusters is not None and len(set(clusters)) > 1:  # a test needs two conversations
                    p_value = cluster_paired_p_value(np.asarray([x for x, _, _ in kept]),
                                                     np.asarray([y for _, y, _ in kept]),
                                                     number_clusters(clusters)[0], seed=seed)
                out.append(Difference(a=a, b=b, metric=metric, mean=float(np.mean(diffs)), interval=[low, high],
                                      n=len(diffs), p_value=p_value))
    return out


def _slices(outcomes: list[QuestionOutcome], conditions: list[str]
            ) -> dict[str, dict[str, dict[str, dict[str, float | None]]]]:
    """``{tag: {value: {condition: {metric: mean, "n": count}}}}`` for the headline metrics."""
    groups: dict[str, dict[str, list[QuestionOutcome]]] = {}
    for q in outcomes:
        for tag, value in q.tags.items():
            groups.setdefault(tag, {}).setdefault(value, []).append(q)
    out: dict[str, dict[str, dict[str, dict[str, float | None]]]] = {}
    for tag in sorted(groups):
        out[tag] = {}
        for value in sorted(groups[tag]):
            members = groups[tag][value]
            row: dict[str, dict[str, float | None]] = {}
            for condition in conditions:
                cell: dict[str, float | None] = {"n": float(len(members))}
                for metric in SLICE_METRICS:
                    values = _values(members, condition, metric)
                    cell[metric] = float(np.mean(values)) if values else None
                row[condition] = cell
            out[tag][value] = row
    return out


def _unmeasured(outcomes: list[QuestionOutcome], conditions: list[str], retrieval: dict[str, Any]) -> dict[str, Any]:
    """What could not be scored, by stage, so that nothing is dropped silently (``retrieval_unlabelled``: questions
    to refuse without gold ids, which have nothing to score retrieval against)."""
    missing_answers = {c: [q.question_id for q in outcomes
                           if q.conditions[c].answer is None and q.conditions[c].skipped is None] for c in conditions}
    skipped = {c: [q.question_id for q in outcomes if q.conditions[c].skipped] for c in conditions}
    claims = {c: sum(cl.verdict == "unmeasured" for q in outcomes for cl in q.conditions[c].claims)
              for c in conditions}
    no_label = [q.question_id for q in outcomes if q.expected_behaviour == "answer" and not q.answers]
    relevance = {c: unmeasured_relevance(outcomes, c) for c in conditions}
    return {
        "answers": {c: ids for c, ids in missing_answers.items() if ids},
        "relevance": {c: ids for c, ids in relevance.items() if ids},
        "skipped": {c: ids for c, ids in skipped.items() if ids},
        "claims": {c: n for c, n in claims.items() if n},
        "correctness_unlabelled": no_label,
        "retrieval_unlabelled": list(retrieval.get("unlabelled", [])),
        "retrieval_judgments": int(retrieval.get("unmeasured_judgments", 0) or 0),
    }
