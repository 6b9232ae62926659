"""An evaluation dataset: :class:`EvaluationDataset`, an ordered set of queries with unique ids and an optional
corpus, read from dataset files (JSON Lines, JSON, CSV, SQuAD, BEIR folders) through :mod:`evret_core.io.dataset_files`
and written back as JSON Lines."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from evret_core.contracts.errors import EvretError
from evret_core.io.hashing import content_hash
from evret_core.io.jsonio import iter_json_lines, loads_json, read_text
from evret_core.io.outputs import write_output
from evret_core.io.queries import QueryExample

__all__ = ["EvaluationDataset"]


class EvaluationDataset(BaseModel):
    """An ordered set of queries with unique ids, plus an optional corpus (id -> record) for retrievers.

    Read one with :meth:`from_jsonl`, :meth:`from_json`, :meth:`from_csv` or :meth:`load` (by suffix). ``notes``
    say what a reader left out of the file (a SQuAD file's unanswerable questions, a RAG question set's questions
    to refuse without labels); the CLI prints them.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    queries: list[QueryExample]
    corpus: dict[str, dict[str, Any]] | None = None
    name: str | None = None
    notes: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_ids(self) -> EvaluationDataset:
        seen: set[str] = set()
        for example in self.queries:
            if example.query_id in seen:
                raise ValueError(f"duplicate query_id {example.query_id!r}")
            seen.add(example.query_id)
        return self

    def __len__(self) -> int:
        return len(self.queries)

    def __iter__(self) -> Iterator[QueryExample]:  # type: ignore[override]
        return iter(self.queries)

    @classmethod
    def from_records(cls, records: Iterable[Any], source: str = "<records>") -> EvaluationDataset:
        from evret_core.io.dataset_files import collect_examples

        rows = ((f"{source}: record {i}", f"at {source}: record {i}", r) for i, r in enumerate(records, start=1))
        notes: list[str] = []
        examples = collect_examples(rows, source, notes)
        return cls(queries=examples, name=Path(source).stem if source != "<records>" else None, notes=notes)

    @classmethod
    def from_jsonl(cls, path: str | Path) -> EvaluationDataset:
        """One JSON object per line; blank lines are skipped. Errors name the file and line."""
        from evret_core.io.dataset_files import collect_examples

        path = Path(path)
        rows = ((where, f"on line {lineno}", record) for lineno, where, record in iter_json_lines(path))
        notes: list[str] = []
        return cls(queries=collect_examples(rows, path, notes), name=path.stem, notes=notes)

    @classmethod
    def from_json(cls, path: str | Path) -> EvaluationDataset:
        """A JSON list of records, an object with a ``queries`` list, or a SQuAD-format file (an object with a
        ``data`` list: see :func:`~evret_core.io.dataset_files.squad_examples`; its paragraphs become the corpus)."""
        path = Path(path)
        data = loads_json(read_text(path), path)
        if isinstance(data, Mapping) and "queries" not in data and "data" in data:
            from evret_core.io.dataset_files import squad_examples

            examples, corpus, notes = squad_examples(data, path)
            return cls(queries=examples, corpus=corpus, name=path.stem, notes=notes)
        if isinstance(data, Mapping):
            data = data.get("queries")
        if not isinstance(data, list):
            raise EvretError(f"{path}: expected a list of records, an object with a 'queries' list, or a "
                             f"SQuAD-format object with a 'data' list")
        dataset = cls.from_records(data, source=str(path))
        dataset.name = path.stem
        return dataset

    @classmethod
    def from_csv(cls, path: str | Path) -> EvaluationDataset:
        """Columns ``query`` (required), ``query_id``, ``expected_answers``, ``relevant_doc_ids``, ``tags`` (or
        another spelling of each: :data:`~evret_core.io.dataset_files.FIELDS`), separated by ``,``, ``;``, tab or
        ``|`` (told by the header).

        ``expected_answers`` and ``relevant_doc_ids`` hold a JSON list or a ``|``-separated list; ``tags`` a
        JSON object or ``key=value`` pairs separated by ``;``. An answer with aliases is a list inside the JSON
        list: ``[["10th century", "the 10th century"], "France"]``. Errors name the file and line.
        """
        from evret_core.io.dataset_files import csv_examples

        path = Path(path)
        notes: list[str] = []
        return cls(queries=csv_examples(path, notes), name=path.stem, notes=notes)

    @classmethod
    def load(cls, path: str | Path) -> EvaluationDataset:
        """Read a dataset by its suffix (.jsonl, .json, .csv), or a BEIR folder."""
        path = Path(path)
        if not path.exists():
            raise EvretError(f"{path}: no such file or folder")
        if path.is_dir():
            from_beir = getattr(cls, "from_beir", None)
            if from_beir is None:
                raise EvretError(f"{path}: is a folder; give a .jsonl, .json or .csv dataset file")
            return from_beir(path)  # type: ignore[no-any-return]
        suffix = path.suffix.lower()
        if suffix in (".jsonl", ".ndjson"):
            return cls.from_jsonl(path)
        if suffix == ".json":
            return cls.from_json(path)
        if suffix == ".csv":
            return cls.from_csv(path)
        raise EvretError(f"{path}: unknown dataset format {suffix!r}; use .jsonl, .json or .csv")

    @classmethod
    def from_beir(cls, folder: str | Path, split: str = "test") -> EvaluationDataset:
        """A BEIR folder (corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv) as an id-labelled dataset with its corpus.

        Each query's ``relevant_doc_ids`` are its graded judgments in the split; queries without judgments in
        the split are dropped. ``corpus`` maps doc id -> ``{"title", "text"}``. Errors name the file and line.
        """
        from evret_core.io.dataset_files import beir_examples

        folder = Path(folder)
        examples, corpus = beir_examples(folder, split)
        return cls(queries=examples, corpus=corpus, name=folder.name)

    def to_jsonl(self, path: str | Path) -> None:
        """Write the queries in the JSONL record format that :meth:`from_jsonl` reads."""
        lines = []
        for q in self.queries:
            record: dict[str, Any] = {"query_id": q.query_id, "query": q.query_text}
            if q.expected_answers:
                record["expected_answers"] = q.answers_record()
            if q.relevant_doc_ids:
                record["relevant_doc_ids"] = q.relevant_doc_ids
            if q.tags:
                record["tags"] = q.tags
            lines.append(json.dumps(record, ensure_ascii=False))
        write_output(path, "\n".join(lines) + "\n")

    def content_hash(self) -> str:
        """SHA-256 over the queries' canonical JSON: the same dataset always hashes the same
        (:mod:`evret_core.io.hashing`)."""
        return content_hash(self.queries)
