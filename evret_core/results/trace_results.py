"""Agent-trace results (``evret trace``): per-hop retrieval scores, per-trace outcomes and their aggregates.

A schema of its own (``"schema": "evret-trace"``, ``schema_version`` 1, ``docs/traces.md``). Every aggregate is
re-derived from the per-hop and per-trace values when a file is read (:func:`check_trace_results`): a tampered file
is refused, naming it, before anything of it is printed. Hop numbers count retrieve hops from 1.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from evret_core.contracts.errors import EvretError
from evret_core.io.redact import redact
from evret_core.results.model import Results, ScoreView, ValueCheck, metric_value_range
from evret_core.results.per_query import QueryResult
from evret_core.version import __version__

__all__ = ["OUTCOMES", "TRACE_SCHEMA", "TRACE_SCHEMA_VERSION", "HopRecord", "TraceOutcome", "TraceResults",
           "check_trace_results", "derive_outcome", "mean_or_none"]

TRACE_SCHEMA = "evret-trace"
TRACE_SCHEMA_VERSION = 1

OUTCOMES = ("right", "never_found", "found_not_used", "lost_at_hop", "no_retrieval", "unmeasured")
"""What became of each agent run (``docs/traces.md``):

- ``right``: the final answer is correct;
- ``lost_at_hop``: with hop labels, a hop did not find its own gold (the chain broke at ``first_lost_hop``);
- ``never_found``: no hop found the gold;
- ``found_not_used``: some hop found the gold, and the final answer is wrong;
- ``no_retrieval``: the run has no retrieve hop;
- ``unmeasured``: no labels, or (for the answer-dependent outcomes) no answer or no expected answer.
"""


def derive_outcome(found: Sequence[bool | None], own_labels: Sequence[bool],
                   answer_right: bool | None) -> tuple[str, int | None, int | None]:
    """``(outcome, found_at_hop, first_lost_hop)`` of a trace from its retrieve hops' ``found`` (None: the hop is
    unmeasured), whether each hop had labels of its own, and whether the final answer is right (None: unknown).
    Hop numbers count from 1."""
    found_at = next((n for n, f in enumerate(found, start=1) if f), None)
    if any(own_labels):
        lost = next((n for n, (f, own) in enumerate(zip(found, own_labels, strict=True), start=1)
                     if own and f is False), None)
    else:
        lost = len(found) if found and found_at is None and all(f is not None for f in found) else None
    if not found:
        return "no_retrieval", None, None
    if all(f is None for f in found):
        return "unmeasured", None, None
    if answer_right:
        return "right", found_at, lost
    if any(own_labels) and lost is not None:
        return "lost_at_hop", found_at, lost
    if found_at is None:
        return "never_found", None, lost
    if answer_right is False:
        return "found_not_used", found_at, lost
    return "unmeasured", found_at, lost


def mean_or_none(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


class HopRecord(BaseModel):
    """One hop of a trace as the results file keeps it: ``number`` (retrieve hops, from 1; None for a rerank hop),
    ``query_id`` (its record in ``queries``; None when unmeasured) and ``found`` (a judged-relevant document in its
    top k; None when unmeasured)."""

    query: str
    tool: str | None = None
    kind: str = "retrieve"
    number: int | None = None
    query_id: str | None = None
    own_labels: bool = False
    found: bool | None = None


class TraceOutcome(BaseModel):
    """One trace's outcome and what it follows from."""

    question: str | None = None
    answer: str | None = None
    answer_right: bool | None = None
    outcome: str
    found_at_hop: int | None = None
    first_lost_hop: int | None = None
    tags: dict[str, str] = Field(default_factory=dict)
    hops: list[HopRecord] = Field(default_factory=list)


class TraceResults(Results):
    """The outcome of ``evret trace``; see the module docs and ``docs/traces.md`` for the schema."""

    schema_: str = Field(default=TRACE_SCHEMA, alias="schema")
    schema_version: int = TRACE_SCHEMA_VERSION
    metrics: list[str]
    k: int
    confidence_level: float = 0.95
    scores: dict[str, float] = Field(default_factory=dict)
    intervals: dict[str, list[float]] = Field(default_factory=dict)
    by_hop_index: dict[str, dict[str, Any]] = Field(default_factory=dict)
    outcomes: dict[str, int] = Field(default_factory=dict)
    first_lost_hop: dict[str, int] = Field(default_factory=dict)
    hops_per_success: float | None = None
    hops_per_trace: float | None = None
    hops_to_gold: float | None = None
    hop_intervals: dict[str, list[float]] = Field(default_factory=dict)
    slices: dict[str, dict[str, dict[str, Any]]] = Field(default_factory=dict)
    per_trace: dict[str, TraceOutcome] = Field(default_factory=dict)
    queries: dict[str, QueryResult] = Field(default_factory=dict)
    config: dict[str, Any] = Field(default_factory=dict)
    stats: dict[str, Any] = Field(default_factory=dict)

    model_config = {"populate_by_name": True}

    KIND: ClassVar[str] = "trace"
    LABEL: ClassVar[str] = "trace results"
    SCHEMA_VERSION: ClassVar[int] = TRACE_SCHEMA_VERSION
    TEXT_SOURCE: ClassVar[str] = "trace results"

    def iter_json(self, indent: int | None = 2) -> Iterator[str]:
        written = self.model_copy(update=self.redacted_sections({"config": self.config, "stats": self.stats}))
        yield written.model_dump_json(indent=indent, by_alias=True) + "\n"

    @classmethod
    def check_document(cls, data: Any, source: str) -> None:
        if not isinstance(data, dict) or data.get("schema") != TRACE_SCHEMA:
            raise EvretError(f"{source}: not an Evret trace results file (no \"schema\": \"{TRACE_SCHEMA}\")")

    def check_values(self, source: str) -> None:
        check_trace_results(self, source)

    def score_view(self) -> ScoreView:
        """``hop/<metric>`` per measured hop (by query id), ``trace/right`` per trace with a measured outcome."""
        scores = {f"hop/{m}": v for m, v in self.scores.items()}
        per_query: dict[str, dict[str, float]] = {
            qid: {f"hop/{m}": v for m, v in q.scores.items()} for qid, q in self.queries.items()}
        judged = [t for t in self.per_trace.values() if t.outcome not in ("unmeasured", "no_retrieval")]
        if judged:
            scores["trace/right"] = sum(t.outcome == "right" for t in judged) / len(judged)
        for tid, t in self.per_trace.items():
            if t.outcome not in ("unmeasured", "no_retrieval"):
                per_query.setdefault(tid, {})["trace/right"] = float(t.outcome == "right")
        return ScoreView(scores, {}, per_query)

    def manifest_dict(self) -> dict[str, Any]:
        """What reproduces the run (the settings of ``config``), redacted."""
        return {"evret_version": __version__, "schema": self.schema_, "schema_version": self.schema_version,
                "num_traces": len(self.per_trace), "num_hops": len(self.queries), **redact(self.config)}


def _hop_values(results: TraceResults) -> dict[str, list[tuple[int, dict[str, float]]]]:
    """Per measured hop: trace id -> [(hop number, scores)]."""
    out: dict[str, list[tuple[int, dict[str, float]]]] = {}
    for tid, trace in results.per_trace.items():
        for hop in trace.hops:
            if hop.query_id is not None and hop.number is not None:
                out.setdefault(tid, []).append((hop.number, results.queries[hop.query_id].scores))
    return out


def check_trace_results(results: TraceResults, source: str) -> None:
    """Refuse a trace results file whose numbers do not follow from its per-hop and per-trace values: a per-hop
    score out of range, a hop pointing at no query, a ``found`` that is not the hop's judged top k, an outcome,
    ``found_at_hop`` or ``first_lost_hop`` that does not follow from the hops, means, counts, histograms and slices
    that are not recomputed from them, broken intervals. Errors name ``source``."""
    check = ValueCheck(source, metric_value_range, unit="hop")
    check.level(results.confidence_level, "confidence_level")
    check.count(results.k, "k")
    if results.k < 1:
        raise check.fail(f"k is {results.k}")
    used: set[str] = set()
    for tid, trace in results.per_trace.items():
        where = f"per_trace[{tid!r}]"
        if trace.outcome not in OUTCOMES:
            raise check.fail(f"{where}.outcome is {trace.outcome!r}; an outcome is one of {', '.join(OUTCOMES)}")
        found: list[bool | None] = []
        own: list[bool] = []
        for i, hop in enumerate(trace.hops):
            at = f"{where}.hops[{i}]"
            if hop.kind not in ("retrieve", "rerank"):
                raise check.fail(f"{at}.kind is {hop.kind!r}")
            if hop.kind == "rerank":
                if hop.number is not None or hop.query_id is not None:
                    raise check.fail(f"{at}: a rerank hop has no number and no query")
                continue
            found.append(hop.found)
            own.append(hop.own_labels)
            if hop.number != len(found):
                raise check.fail(f"{at}.number is {hop.number!r} but it is retrieve hop {len(found)}")
            if hop.query_id is None:
                if hop.found is not None:
                    raise check.fail(f"{at}.found is {hop.found!r} but the hop is unmeasured")
                continue
            query = results.queries.get(hop.query_id)
            if query is None or hop.query_id in used:
                raise check.fail(f"{at}.query_id {hop.query_id!r} is not a query of the file (or is used twice)")
            used.add(hop.query_id)
            for metric, value in query.scores.items():
                check.value(value, metric, f"query {hop.query_id!r}")
            top = query.gains[:results.k]
            if hop.found != any(g > 0 for g in top):
                raise check.fail(f"{at}.found is {hop.found!r} but the judged top {results.k} of query "
                                 f"{hop.query_id!r} says {any(g > 0 for g in top)!r}")
        outcome, found_at, lost = derive_outcome(found, own, trace.answer_right)
        if (outcome, found_at, lost) != (trace.outcome, trace.found_at_hop, trace.first_lost_hop):
            raise check.fail(f"{where}: outcome {trace.outcome!r} (found_at_hop {trace.found_at_hop!r}, "
                             f"first_lost_hop {trace.first_lost_hop!r}) does not follow from its hops, which give "
                             f"{outcome!r} ({found_at!r}, {lost!r})")
    extra = sorted(set(results.queries) - used)
    if extra:
        raise check.fail(f"queries holds {extra[0]!r}, which no hop of per_trace uses")
    hops = _hop_values(results)
    stray = sorted(set(results.scores) - set(results.metrics))
    if stray:
        raise check.fail(f"scores holds {stray[0]!r}, which is not one of the run's metrics")
    for metric in results.metrics:
        values = [s[metric] for rows in hops.values() for _n, s in rows if metric in s]
        if metric in results.scores:
            check.mean(results.scores[metric], values, metric, f"scores.{metric}")
        elif values:
            raise check.fail(f"scores has no {metric} although {len(values)} hops hold it")
    for metric, interval in check.table(results.intervals, "intervals").items():
        if metric not in results.scores:
            raise check.fail(f"intervals holds {metric!r}, which has no score")
        check.pair(interval, f"intervals.{metric}", metric_value_range(metric))
    by_number: dict[str, list[dict[str, float]]] = {}
    for trace_rows in hops.values():
        for number, scores in trace_rows:
            by_number.setdefault(str(number), []).append(scores)
    if set(results.by_hop_index) != set(by_number):
        raise check.fail(f"by_hop_index has hops {sorted(results.by_hop_index)} but the measured hops are "
                         f"{sorted(by_number)}")
    for key, cell in results.by_hop_index.items():
        where = f"by_hop_index[{key!r}]"
        check.table(cell, where)
        cell_rows = by_number[key]
        if cell.get("n") != len(cell_rows):
            raise check.fail(f"{where}.n is {cell.get('n')!r} but {len(cell_rows)} hops have that number")
        for metric, mean in check.table(cell.get("scores", {}), f"{where}.scores").items():
            check.mean(check.number(mean, f"{where}.scores.{metric}"),
                       [s[metric] for s in cell_rows if metric in s], metric, f"{where}.scores.{metric}")
        for metric, interval in check.table(cell.get("intervals", {}), f"{where}.intervals").items():
            check.pair(interval, f"{where}.intervals.{metric}", metric_value_range(metric))
    counts = {name: 0 for name in OUTCOMES}
    lost_histogram: dict[str, int] = {}
    for trace in results.per_trace.values():
        counts[trace.outcome] += 1
        if trace.first_lost_hop is not None:
            lost_histogram[str(trace.first_lost_hop)] = lost_histogram.get(str(trace.first_lost_hop), 0) + 1
    if results.outcomes != counts:
        raise check.fail(f"outcomes is {results.outcomes!r} but the traces' outcomes count {counts!r}")
    if results.first_lost_hop != lost_histogram:
        raise check.fail(f"first_lost_hop is {results.first_lost_hop!r} but the traces give {lost_histogram!r}")
    retrieve_hops = {tid: sum(h.kind == "retrieve" for h in t.hops) for tid, t in results.per_trace.items()}
    for name, stored, values in (
            ("hops_per_success", results.hops_per_success,
             [float(retrieve_hops[tid]) for tid, t in results.per_trace.items() if t.outcome == "right"]),
            ("hops_per_trace", results.hops_per_trace, [float(n) for n in retrieve_hops.values()]),
            ("hops_to_gold", results.hops_to_gold,
             [float(t.found_at_hop) for t in results.per_trace.values() if t.found_at_hop is not None])):
        expected = mean_or_none(values)
        if (stored is None) != (expected is None) or (stored is not None and expected is not None
                                                        and abs(stored - expected) > 1e-9 * max(1.0, expected)):
            raise check.fail(f"{name} is {stored!r} but the traces give {expected!r}")
        if (name in results.hop_intervals) != (stored is not None):
            raise check.fail(f"hop_intervals {'has' if name in results.hop_intervals else 'lacks'} {name}, whose "
                             f"value is {stored!r}")
        if stored is not None:
            check.pair(results.hop_intervals[name], f"hop_intervals.{name}", (min(values), max(values)))
    extra_intervals = sorted(set(results.hop_intervals) - {"hops_per_success", "hops_per_trace", "hops_to_gold"})
    if extra_intervals:
        raise check.fail(f"hop_intervals holds {extra_intervals[0]!r}")
    expected_slices = trace_slices(results.per_trace, hops, results.metrics)
    if results.slices != expected_slices:
        raise check.fail("slices do not follow from the traces' tags, outcomes and hop scores")


def trace_slices(per_trace: dict[str, TraceOutcome], hops: dict[str, list[tuple[int, dict[str, float]]]],
                 metrics: Sequence[str]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per tag name and value: ``n`` traces, their outcome counts and the mean of each metric over their hops."""
    groups: dict[str, dict[str, list[str]]] = {}
    for tid, trace in per_trace.items():
        for name, value in trace.tags.items():
            groups.setdefault(name, {}).setdefault(value, []).append(tid)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for name in sorted(groups):
        out[name] = {}
        for value in sorted(groups[name]):
            tids = groups[name][value]
            outcomes = {o: sum(per_trace[t].outcome == o for t in tids) for o in OUTCOMES}
            scores = {}
            for metric in metrics:
                values = [s[metric] for t in tids for _n, s in hops.get(t, []) if metric in s]
                if values:
                    scores[metric] = math.fsum(values) / len(values)
            out[name][value] = {"n": len(tids), "outcomes": outcomes, "scores": scores}
    return out
