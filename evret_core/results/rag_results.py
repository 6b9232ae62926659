"""RAG results: retrieval, generation and joint sections, per question and per condition.

A versioned schema of its own (``schema: "evret-rag"``, ``schema_version``), documented in ``docs/rag.md``.
Scores that do not apply (the citation precision of an answer without citations, the F1 of a question with only
gold ids) are ``null``, never 0, and are left out of the means; ``n`` says how many questions each mean covers.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from evret_core.errors import EvretError
from evret_core.rag.generate.generators import Answer

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


class RagResults(BaseModel):
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

    def to_json(self, path: str | Path | None = None, indent: int | None = 2) -> str:
        """The results as JSON (``schema`` first); with ``path``, also written there atomically. Keys and URL
        credentials in ``config`` and ``stats`` are redacted (:func:`evret_core.results.redact.redact_sections`)."""
        from evret_core.results.redact import redact_sections

        written = self.model_copy(update=redact_sections({"config": self.config, "stats": self.stats}))
        text = written.model_dump_json(indent=indent, by_alias=True)
        if path is not None:
            from evret_core.results.evaluation import atomic_write_text

            atomic_write_text(Path(path), text + "\n")
        return text

    @classmethod
    def from_json(cls, path_or_text: str | Path) -> RagResults:
        """Load results written by :meth:`to_json` (a path or the JSON text itself)."""
        text = str(path_or_text)
        where = "RAG results"
        if not text.lstrip().startswith("{"):
            from evret_core.data.corpus import read_text

            where = text
            text = read_text(text, what="RAG results file")
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise EvretError(f"{where}:{exc.lineno}: invalid JSON ({exc.msg})") from None
        if not isinstance(data, dict) or data.get("schema") != RAG_SCHEMA:
            raise EvretError(f"{where}: not an Evret RAG results file (no \"schema\": \"{RAG_SCHEMA}\")")
        version = data.get("schema_version")
        if not isinstance(version, int) or version > RAG_SCHEMA_VERSION:
            raise EvretError(f"{where}: schema_version {version!r} is newer than this Evret reads "
                             f"({RAG_SCHEMA_VERSION}); upgrade evret-core")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            err = exc.errors()[0]
            raise EvretError(f"{where}: {'.'.join(str(p) for p in err['loc'])}: {err['msg']}") from None

    def summary_rows(self) -> list[tuple[str, str, float | None]]:
        """``(condition, metric, mean)`` rows of the generation section, in condition order."""
        return [(c, m, v) for c in self.conditions for m, v in self.generation.get(c, {}).items()]


def clean(value: float | None) -> float | None:
    """``None`` for NaN or None, else the float: JSON has no NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return float(value)
