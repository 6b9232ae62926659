"""RAG results: retrieval, generation and joint sections, per question and per condition.

A versioned schema of its own (``schema: "evret-rag"``, ``schema_version``), documented in ``docs/rag.md``; read,
checked and written by the shared :class:`~evret_core.results.model.Results` base, as retrieval results are.
Scores that do not apply (the citation precision of an answer without citations, the F1 of a question with only
gold ids) are ``null``, never 0, and are left out of the means; ``n`` says how many questions each mean covers.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from evret_core.errors import EvretError
from evret_core.rag.generate.generators import Answer
from evret_core.results.model import Results, ScoreView, ValueCheck, metric_value_range
from evret_core.results.outputs import write_output

RAG_SCHEMA = "evret-rag"
RAG_SCHEMA_VERSION = 1

ATTRIBUTIONS = ("both_right", "retrieval_failure", "context_noise", "generator_failure", "unmeasured")
"""Per-question failure attribution from the gold and retrieved conditions:

- ``both_right``: right with gold context and with retrieved context;
- ``retrieval_failure``: right with gold, wrong with retrieved, and no gold document was retrieved;
- ``context_noise``: right with gold, wrong with retrieved, although a gold document was retrieved (the other
  retrieved documents misled the generator);
- ``generator_failure``: wrong even with the gold context;
- ``unmeasured``: an answer or a judgment is missing, or the question has no correctness label.
"""


class ClaimResult(BaseModel):
    claim: str
    citations: list[str] = Field(default_factory=list)
    verdict: str
    supporting: list[str] = Field(default_factory=list)
    contradicting: list[str] = Field(default_factory=list)


class ConditionOutcome(BaseModel):
    """One question under one condition: the contexts given, the answer, the claim verdicts and the scores."""

    context_ids: list[str]
    expected_behaviour: str
    answer: Answer | None = None
    claims: list[ClaimResult] = Field(default_factory=list)
    scores: dict[str, float | None] = Field(default_factory=dict)
    correct: bool | None = None
    info: dict[str, Any] = Field(default_factory=dict)
    skipped: str | None = None


class QuestionOutcome(BaseModel):
    """Everything about one question: its labels, its retrieval scores, and its outcome under each condition."""

    question_id: str
    question: str
    tags: dict[str, str] = Field(default_factory=dict)
    expected_behaviour: str
    answers: list[list[str]] = Field(default_factory=list)
    gold_doc_ids: list[str] = Field(default_factory=list)
    retrieved_ids: list[str] = Field(default_factory=list)
    retrieval: dict[str, float] | None = None
    gold_retrieved: bool | None = None
    conditions: dict[str, ConditionOutcome] = Field(default_factory=dict)
    attribution: str | None = None


class Difference(BaseModel):
    """``b - a`` of a metric over the questions measured under both conditions, with its paired bootstrap
    interval (questions resampled together, so the interval reflects the pairing)."""

    a: str
    b: str
    metric: str
    mean: float
    interval: list[float]
    n: int


class RagResults(Results):
    """The outcome of a RAG evaluation; see the module docs for the schema."""

    schema_: str = Field(default=RAG_SCHEMA, alias="schema")
    schema_version: int = RAG_SCHEMA_VERSION
    conditions: list[str]
    confidence_level: float = 0.95
    retrieval: dict[str, float] = Field(default_factory=dict)
    retrieval_intervals: dict[str, list[float]] = Field(default_factory=dict)
    generation: dict[str, dict[str, float | None]] = Field(default_factory=dict)
    generation_intervals: dict[str, dict[str, list[float]]] = Field(default_factory=dict)
    generation_n: dict[str, dict[str, int]] = Field(default_factory=dict)
    attribution: dict[str, int] = Field(default_factory=dict)
    differences: list[Difference] = Field(default_factory=list)
    slices: dict[str, dict[str, dict[str, dict[str, float | None]]]] = Field(default_factory=dict)
    adversarial: dict[str, Any] = Field(default_factory=dict)
    unmeasured: dict[str, Any] = Field(default_factory=dict)
    per_question: dict[str, QuestionOutcome] = Field(default_factory=dict)
    config: dict[str, Any] = Field(default_factory=dict)
    stats: dict[str, Any] = Field(default_factory=dict)

    model_config = {"populate_by_name": True}

    KIND: ClassVar[str] = "rag"
    LABEL: ClassVar[str] = "RAG results"
    SCHEMA_VERSION: ClassVar[int] = RAG_SCHEMA_VERSION
    TEXT_SOURCE: ClassVar[str] = "RAG results"

    def to_json(self, path: str | Path | None = None, indent: int | None = 2) -> str:
        """The results as JSON (``schema`` first); with ``path``, also written there atomically. Keys and URL
        credentials in ``config`` and ``stats`` are redacted (:meth:`~evret_core.results.model.Results.redacted_sections`)."""
        text = self.json_text(indent)
        if path is not None:
            write_output(Path(path), text + "\n")
        return text

    def iter_json(self, indent: int | None = 2) -> Iterator[str]:
        written = self.model_copy(update=self.redacted_sections({"config": self.config, "stats": self.stats}))
        yield written.model_dump_json(indent=indent, by_alias=True) + "\n"

    @classmethod
    def check_document(cls, data: Any, source: str) -> None:
        if not isinstance(data, dict) or data.get("schema") != RAG_SCHEMA:
            raise EvretError(f"{source}: not an Evret RAG results file (no \"schema\": \"{RAG_SCHEMA}\")")

    @classmethod
    def validation_message(cls, source: str, problem: str) -> str:
        return f"{source}: {problem}"

    def check_values(self, source: str) -> None:
        check_rag_results(self, source)

    def score_view(self) -> ScoreView:
        """The gateable scores: ``retrieval/recall@5``, ``gold/f1``, ``retrieved/correct``...; per question, the
        scores that apply to it."""
        scores = {f"retrieval/{m}": v for m, v in self.retrieval.items()}
        intervals = {f"retrieval/{m}": v for m, v in self.retrieval_intervals.items()}
        for condition, means in self.generation.items():
            scores.update({f"{condition}/{m}": v for m, v in means.items() if v is not None})
            intervals.update({f"{condition}/{m}": v for m, v in self.generation_intervals.get(condition, {}).items()})
        per_query: dict[str, dict[str, float]] = {}
        for qid, q in self.per_question.items():
            row = {f"retrieval/{m}": v for m, v in (q.retrieval or {}).items()}
            for condition, outcome in q.conditions.items():
                row.update({f"{condition}/{m}": v for m, v in outcome.scores.items() if v is not None})
            per_query[qid] = row
        return ScoreView(scores, intervals, per_query)

    def manifest_dict(self) -> dict[str, Any]:
        """What reproduces the run (RAG files store no manifest: it is built from ``config``), redacted."""
        import platform

        from evret_core import __version__
        from evret_core.results.evaluation import _plugin_versions
        from evret_core.results.redact import redact

        config = redact(self.config)
        return {"evret_version": __version__, "schema": self.schema_, "schema_version": self.schema_version,
                "num_questions": len(self.per_question), "conditions": list(self.conditions),
                **{part: config.get(part) for part in ("retriever", "generator", "claim_judge", "answer_judge",
                                                       "relevance", "retrieval_judge", "executor", "k", "seed",
                                                       "question_set")},
                "confidence_level": self.confidence_level, "plugins": _plugin_versions(),
                "python": platform.python_version(), "platform": platform.platform(terse=True)}

    def summary_rows(self) -> list[tuple[str, str, float | None]]:
        """``(condition, metric, mean)`` rows of the generation section, in condition order."""
        return [(c, m, v) for c in self.conditions for m, v in self.generation.get(c, {}).items()]


UNIT_SCORES = frozenset({"exact", "f1", "correct", "behaviour_ok", "refused", "answer_judge", "answer_relevance",
                         "groundedness", "faithfulness", "contradiction_rate", "citation_precision", "citation_recall",
                         "has_ans_exact", "has_ans_f1", "no_ans_exact", "no_ans_f1", "wrong_refusal_rate",
                         "correct_refusal_rate"})
"""The built-in generation scores and rates, each in [0, 1]; a plugin's RAG score is only checked finite."""


def _score_range(name: str) -> tuple[float, float] | None:
    section, _, metric = name.partition("/")
    if section == "retrieval":
        return metric_value_range(metric)
    return (0.0, 1.0) if metric in UNIT_SCORES else None


def check_rag_results(results: RagResults, source: str) -> None:
    """Refuse a RAG results file whose numbers cannot be what Evret wrote, as retrieval results are refused
    (:func:`evret_core.results.evaluation.check_results`): a per-question score that is NaN, infinite or outside its
    range, a ``per_question`` key holding another question's record, a mean (retrieval, or generation per
    condition) that is not the mean of the per-question values it covers, an interval that is not ``[low, high]``
    with finite ``low <= high``. Errors name ``source``, the question and the score (``gold/f1``)."""
    check = ValueCheck(source, _score_range)
    retrieval: dict[str, list[float]] = {}
    generation: dict[tuple[str, str], list[float]] = {}
    scored = 0
    for qid, q in results.per_question.items():
        if q.question_id != qid:
            raise EvretError(f"{source}: per_question key {qid!r} holds the record of question {q.question_id!r}; "
                             f"the file was edited or damaged")
        scored += q.retrieval is not None
        for metric, value in (q.retrieval or {}).items():
            check.value(value, f"retrieval/{metric}", f"question {qid!r}")
            retrieval.setdefault(metric, []).append(value)
        for condition, outcome in q.conditions.items():
            for metric, score in outcome.scores.items():
                if score is not None:
                    check.value(score, f"{condition}/{metric}", f"question {qid!r}")
                    generation.setdefault((condition, metric), []).append(score)
    for metric, mean in results.retrieval.items():
        check.value(mean, f"retrieval/{metric}", "retrieval")
        check.mean(mean, retrieval.get(metric, []), f"retrieval/{metric}", f"retrieval.{metric}", total=scored)
    for metric, interval in results.retrieval_intervals.items():
        check.interval(interval, f"retrieval/{metric}", f"retrieval_intervals.{metric}")
    for condition, means in results.generation.items():
        for metric, generated in means.items():
            if generated is not None:
                check.value(generated, f"{condition}/{metric}", "generation")
                check.mean(generated, generation.get((condition, metric), []), f"{condition}/{metric}",
                           f"generation.{condition}.{metric}")
        for metric, interval in results.generation_intervals.get(condition, {}).items():
            check.interval(interval, f"{condition}/{metric}", f"generation_intervals.{condition}.{metric}")
    for d in results.differences:
        name = f"{d.metric} ({d.b} - {d.a})"  # a difference lies in [-1, 1]: only checked finite
        check.value(d.mean, name, "differences")
        check.interval(d.interval, name, f"differences: {name}", in_range=False)
    for tag, values in results.slices.items():
        for group, by_condition in values.items():
            for condition, cells in by_condition.items():
                for metric, score in cells.items():
                    if score is not None:
                        check.value(score, f"{condition}/{metric}", f"slices.{tag}.{group}")


def clean(value: float | None) -> float | None:
    """``None`` for NaN or None, else the float: JSON has no NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return float(value)
