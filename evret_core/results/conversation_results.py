"""Conversation results: a conversation run's per-form scores, the differences between query forms, the
aggregates per turn index, per conversation and per tag value, and every turn's queries.

A versioned schema of its own (``schema: "evret-conversation"``, ``schema_version``), documented in
``docs/conversation-evaluation.md``; read, checked and written by the shared
:class:`~evret_core.results.model.Results` base. Every mean, difference and count of the summary is recomputed
from the per-turn values when a file is read (:meth:`ConversationResults.check_values`): an edited number is
refused, naming it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, Field

from evret_core.contracts.errors import EvretError
from evret_core.io.redact import redact
from evret_core.results.model import Results, ScoreView, ValueCheck
from evret_core.results.per_query import QueryResult

__all__ = ["CONVERSATION_SCHEMA", "ConversationResults", "FormQuery", "TurnRecord"]

CONVERSATION_SCHEMA = "evret-conversation"
CONVERSATION_SCHEMA_VERSION = 1


class FormQuery(BaseModel):
    """The query a turn was retrieved with under one form: its id in ``queries`` and its text."""

    query_id: str
    query: str


class TurnRecord(BaseModel):
    """One labelled turn: its conversation, 1-based index, tags, and its query per form (a form without a text for
    the turn is absent: unmeasured there)."""

    conversation_id: str
    turn_index: int
    tags: dict[str, str] = Field(default_factory=dict)
    forms: dict[str, FormQuery] = Field(default_factory=dict)


class ConversationResults(Results):
    """The outcome of a conversation run (:class:`~evret_core.conversation.turn_evaluator.ConversationEvaluator`);
    see the module docs and docs/conversation-evaluation.md for the schema."""

    schema_: str = Field(default=CONVERSATION_SCHEMA, alias="schema")
    schema_version: int = CONVERSATION_SCHEMA_VERSION
    forms: list[str]
    baseline_form: str
    metrics: list[str]
    unit: str = "conversation"
    test: str = "randomization"
    confidence_level: float = 0.95
    scores: dict[str, dict[str, float]] = Field(default_factory=dict)
    intervals: dict[str, dict[str, list[float]]] = Field(default_factory=dict)
    n: dict[str, dict[str, int]] = Field(default_factory=dict)
    differences: list[dict[str, Any]] = Field(default_factory=list)
    by_turn_index: dict[str, dict[str, dict[str, Any]]] = Field(default_factory=dict)
    conversation_means: dict[str, dict[str, dict[str, Any]]] = Field(default_factory=dict)
    worst_conversations: list[dict[str, Any]] = Field(default_factory=list)
    slices: dict[str, dict[str, dict[str, dict[str, Any]]]] = Field(default_factory=dict)
    unmeasured: dict[str, Any] = Field(default_factory=dict)
    manifest: dict[str, Any] = Field(default_factory=dict)
    config: dict[str, Any] = Field(default_factory=dict)
    stats: dict[str, Any] = Field(default_factory=dict)
    per_turn: dict[str, TurnRecord] = Field(default_factory=dict)
    queries: dict[str, QueryResult] = Field(default_factory=dict)

    model_config = {"populate_by_name": True}

    KIND: ClassVar[str] = "conversation"
    LABEL: ClassVar[str] = "conversation results"
    SCHEMA_VERSION: ClassVar[int] = CONVERSATION_SCHEMA_VERSION
    TEXT_SOURCE: ClassVar[str] = "conversation results"

    def iter_json(self, indent: int | None = 2) -> Iterator[str]:
        written = self.model_copy(update=self.redacted_sections(
            {"config": self.config, "stats": self.stats, "manifest": self.manifest}))
        yield written.model_dump_json(indent=indent, by_alias=True) + "\n"

    def to_json(self, path: str | None = None, indent: int | None = 2) -> str:
        """The results as JSON (``schema`` first); with ``path``, also written there through the output guard."""
        if path is not None:
            self.write(path, indent)
        return self.json_text(indent)

    @classmethod
    def check_document(cls, data: Any, source: str) -> None:
        if not isinstance(data, dict) or data.get("schema") != CONVERSATION_SCHEMA:
            raise EvretError(f"{source}: not an Evret conversation results file (no \"schema\": "
                             f"\"{CONVERSATION_SCHEMA}\")")

    @classmethod
    def validation_message(cls, source: str, problem: str) -> str:
        return f"{source}: {problem}"

    def manifest_dict(self) -> dict[str, Any]:
        """The run's manifest (the inner retrieval run's, with the conversation dataset named), redacted."""
        return dict(redact(self.manifest))

    # -- per-turn values ----------------------------------------------------------------------------------------
    def turn_values(self, form: str, metric: str) -> np.ndarray:
        """``metric`` per labelled turn (``per_turn`` order) under ``form``; NaN where the form has no query."""
        out = np.full(len(self.per_turn), np.nan)
        for i, record in enumerate(self.per_turn.values()):
            query = record.forms.get(form)
            if query is not None:
                result = self.queries.get(query.query_id)
                if result is not None and metric in result.scores:
                    out[i] = result.scores[metric]
        return out

    def score_view(self) -> ScoreView:
        """Scores named ``form/metric``; per turn id, the values of the forms the turn was measured under (so
        ``evret compare`` pairs the turns of two conversation runs)."""
        scores = {f"{form}/{m}": v for form, means in self.scores.items() for m, v in means.items()}
        intervals = {f"{form}/{m}": v for form, spans in self.intervals.items() for m, v in spans.items()}
        per_turn: dict[str, dict[str, float]] = {}
        for turn_id, record in self.per_turn.items():
            row: dict[str, float] = {}
            for form, query in record.forms.items():
                result = self.queries.get(query.query_id)
                if result is not None:
                    row.update({f"{form}/{m}": v for m, v in result.scores.items() if m in self.metrics})
            per_turn[turn_id] = row
        return ScoreView(scores, intervals, per_turn)

    def check_values(self, source: str) -> None:
        check_conversation_results(self, source)


def check_conversation_results(results: ConversationResults, source: str) -> None:
    """Every summary number recomputed from the per-turn values: the means and counts per form, the differences
    and their counts, the per-index and per-slice means and counts; every per-query value finite and in range,
    every interval ordered. An :class:`EvretError` names the first number that disagrees."""
    check = ValueCheck(source, unit="turn")
    check.level(results.confidence_level, "confidence_level")
    if results.baseline_form not in results.forms:
        raise check.fail(f"baseline_form {results.baseline_form!r} is not one of forms {results.forms}")
    for qid, result in results.queries.items():
        for metric, value in result.scores.items():
            check.value(value, metric, f"queries.{qid}.scores")
    for turn_id, record in results.per_turn.items():
        for form, query in record.forms.items():
            if form not in results.forms:
                raise check.fail(f"per_turn.{turn_id}.forms: form {form!r} is not one of forms {results.forms}")
            if query.query_id not in results.queries:
                raise check.fail(f"per_turn.{turn_id}.forms.{form}: query {query.query_id!r} is not in queries")
    conversations = [record.conversation_id for record in results.per_turn.values()]
    indexes = [str(record.turn_index) for record in results.per_turn.values()]
    values = {form: {m: results.turn_values(form, m) for m in results.metrics} for form in results.forms}
    first = results.metrics[0] if results.metrics else None
    for form in results.forms:
        for metric, mean in results.scores.get(form, {}).items():
            if metric not in values[form]:
                raise check.fail(f"scores.{form}.{metric}: {metric!r} is not one of metrics {results.metrics}")
            column = values[form][metric]
            check.mean(mean, column[np.isfinite(column)].tolist(), metric, f"scores.{form}.{metric}")
        for metric, interval in results.intervals.get(form, {}).items():
            check.interval(interval, metric, f"intervals.{form}.{metric}")
        if first is not None and form in results.n:
            present = np.isfinite(values[form][first])
            _count(check, results.n[form].get("turns"), int(present.sum()), f"n.{form}.turns")
            _count(check, results.n[form].get("conversations"),
                   len({c for c, p in zip(conversations, present, strict=True) if p}), f"n.{form}.conversations")
    for i, entry in enumerate(results.differences):
        where = f"differences[{i}]"
        a, b, name = entry.get("a"), entry.get("b"), entry.get("metric")
        if a not in values or b not in values or name not in results.metrics:
            raise check.fail(f"{where}: {b!r} - {a!r} on {name!r} names a form or metric the run does not have")
        x, y = values[str(a)][str(name)], values[str(b)][str(name)]
        both = np.isfinite(x) & np.isfinite(y)
        _count(check, entry.get("n_turns"), int(both.sum()), f"{where}.n_turns")
        _count(check, entry.get("n_conversations"), len({c for c, p in zip(conversations, both, strict=True) if p}),
               f"{where}.n_conversations")
        stored = entry.get("mean")
        if both.any():
            expected = math.fsum((y[both] - x[both]).tolist()) / int(both.sum())
            check.agree(check.number(stored, f"{where}.mean"), expected, f"{where}.mean",
                        f"the mean of b - a over its {int(both.sum())} turns")
        elif stored is not None:
            raise check.fail(f"{where}.mean is {stored!r} but no turn is measured under both forms")
        if entry.get("interval") is not None:
            check.interval(entry["interval"], "difference", f"{where}.interval", in_range=False)
        for key in ("p_value", "p_adjusted"):
            if entry.get(key) is not None:
                check.number(entry[key], f"{where}.{key}", (0.0, 1.0))
    for form, cells in results.by_turn_index.items():
        for index, cell in cells.items():
            rows = [i for i, v in enumerate(indexes) if v == index]
            _check_cell(check, results, values, form, rows, cell, f"by_turn_index.{form}.{index}")
    for tag, groups in results.slices.items():
        for tag_value, by_form in groups.items():
            rows = [i for i, record in enumerate(results.per_turn.values()) if record.tags.get(tag) == tag_value]
            for form, cell in by_form.items():
                _check_cell(check, results, values, form, rows, cell, f"slices.{tag}.{tag_value}.{form}")


def _count(check: ValueCheck, stored: Any, expected: int, where: str) -> None:
    if check.count(stored, where) != expected:
        raise check.fail(f"{where} is {stored!r} but the per-turn values count {expected}")


def _check_cell(check: ValueCheck, results: ConversationResults, values: dict[str, dict[str, np.ndarray]],
                form: str, rows: list[int], cell: Any, where: str) -> None:
    """A per-index or per-slice cell: its ``n`` and means over the rows measured under ``form``."""
    cell = check.table(cell, where)
    if form not in values:
        raise check.fail(f"{where}: form {form!r} is not one of forms {results.forms}")
    index = np.asarray(rows, dtype=np.int64)
    first = values[form][results.metrics[0]][index]
    present = index[np.isfinite(first)]
    _count(check, cell.get("n"), int(present.size), f"{where}.n")
    for metric, mean in check.table(cell.get("scores", {}), f"{where}.scores").items():
        if metric not in values[form]:
            raise check.fail(f"{where}.scores: {metric!r} is not one of metrics {results.metrics}")
        column = values[form][metric][present]
        check.mean(check.number(mean, f"{where}.scores.{metric}"), column[np.isfinite(column)].tolist(), metric,
                   f"{where}.scores.{metric}")
    for metric, interval in check.table(cell.get("intervals", {}), f"{where}.intervals").items():
        check.interval(interval, metric, f"{where}.intervals.{metric}")
