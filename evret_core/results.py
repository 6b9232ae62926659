"""Evaluation results: means, per-query detail and the configuration that produced them."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from evret_core.errors import EvretError

SCHEMA_VERSION = 1


class Judgment(BaseModel):
    """What the judge said about one retrieved document of a query.

    ``matched`` lists the indexes of the expected answers it matched; ``unmeasured`` those whose judgment could not
    be made (e.g. an LLM call that failed after every retry). ``assigned`` is the id the document scored as.
    """

    rank: int
    doc_id: str
    score: float | None = None
    text: str | None = None
    matched: list[int] = Field(default_factory=list)
    unmeasured: list[int] = Field(default_factory=list)
    assigned: str | None = None


class QueryResult(BaseModel):
    """One query's scores and the evidence behind them."""

    query_id: str
    query_text: str
    scores: dict[str, float]
    retrieved_ids: list[str]
    relevant_ids: dict[str, float] = Field(default_factory=dict)
    judgments: list[Judgment] = Field(default_factory=list)
    expected_answers: list[str] = Field(default_factory=list)
    tags: dict[str, str] = Field(default_factory=dict)
    labelled_by: str = "text"
    unmeasured: int = 0


class EvaluationResults(BaseModel):
    """The outcome of an evaluation: ``scores`` (metric -> mean), ``per_query`` and how it was produced."""

    schema_version: int = SCHEMA_VERSION
    scores: dict[str, float]
    metrics: list[str]
    per_query: dict[str, QueryResult]
    config: dict[str, Any] = Field(default_factory=dict)
    stats: dict[str, Any] = Field(default_factory=dict)

    def __getitem__(self, metric: str) -> float:
        return self.scores[metric]

    @property
    def num_queries(self) -> int:
        return len(self.per_query)

    def to_json(self, path: str | Path | None = None, indent: int | None = 2) -> str:
        """The results as JSON; with ``path``, also written there atomically (all or nothing)."""
        text = self.model_dump_json(indent=indent)
        if path is not None:
            atomic_write_text(Path(path), text + "\n")
        return text

    @classmethod
    def from_json(cls, path_or_text: str | Path) -> EvaluationResults:
        """Read results written by :meth:`to_json` (a path, or the JSON text itself)."""
        if isinstance(path_or_text, Path) or not str(path_or_text).lstrip().startswith("{"):
            path = Path(path_or_text)
            try:
                text = path.read_text(encoding="utf-8")
            except FileNotFoundError:
                raise EvretError(f"{path}: no such results file") from None
            source = str(path)
        else:
            text, source = str(path_or_text), "<json>"
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise EvretError(f"{source}:{exc.lineno}: invalid JSON ({exc.msg})") from None
        try:
            return cls.model_validate(data)
        except Exception as exc:  # pydantic ValidationError: name the file
            raise EvretError(f"{source}: not an Evret results file ({exc})") from None


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename, so no half-written file is ever seen."""
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    if not directory.exists():
        raise EvretError(f"{path}: folder {directory} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
