"""Labelled judgments: human labels read from JSONL, or labels derived from relevance ids (qrels).

One :class:`LabelledJudgment` is one question a judge answers: does ``retrieved_text`` hold (one of)
``expected``? Several expected strings are alternatives (the aliases of one answer, or every expected answer of
a query when the label comes from ids): the judge's verdict is "any matches" and its score the maximum.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evret_core.contracts.errors import EvretError
from evret_core.contracts.judge import JudgmentContext
from evret_core.io.jsonio import iter_json_lines

LABEL_KEYS = {"query_id", "query", "expected", "retrieved_text", "doc_id", "label",
              # written by `evret calibrate --plan`, ignored when reading labels back
              "score", "stratum", "judge", "note"}


@dataclass(frozen=True)
class LabelledJudgment:
    """A judgment with its true answer (``label``; None while a person has not filled it in)."""

    query_id: str
    query: str
    expected: tuple[str, ...]
    retrieved_text: str
    label: bool | None
    doc_id: str | None = None
    where: str = ""
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    #: a graded label (a qrels grade, 0-3 on TREC DL); None for a yes/no label
    grade: float | None = None

    def contexts(self) -> list[JudgmentContext]:
        """One judgment context per expected string."""
        return [JudgmentContext(query=self.query, expected_text=e, retrieved_text=self.retrieved_text)
                for e in self.expected]

    def to_record(self) -> dict[str, Any]:
        """The JSONL record of this judgment (``expected`` a string when there is one)."""
        record: dict[str, Any] = {"query_id": self.query_id, "query": self.query,
                                  "expected": self.expected[0] if len(self.expected) == 1 else list(self.expected)}
        if self.doc_id is not None:
            record["doc_id"] = self.doc_id
        record["retrieved_text"] = self.retrieved_text
        record.update(self.extra)
        record["label"] = self.label
        return record


def _text(value: Any, where: str, key: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise EvretError(f"{where}: field {key!r} must be a non-empty string")
    return value


def _expected(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (_text(value, where, "expected"),)
    if isinstance(value, list) and value:
        return tuple(_text(v, where, "expected") for v in value)
    raise EvretError(f"{where}: field 'expected' must be a non-empty string or a non-empty list of strings")


def _label(value: Any, where: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise EvretError(f"{where}: field 'label' must be true, false or null (not yet labelled), got {value!r}")


def label_from_record(record: Any, where: str, corpus: Mapping[str, Any] | None = None) -> LabelledJudgment:
    """One labelled judgment from a JSON object; errors name ``where`` (``file:line``)."""
    if not isinstance(record, Mapping):
        raise EvretError(f"{where}: expected a JSON object, got {type(record).__name__}")
    unknown = set(record) - LABEL_KEYS
    if unknown:
        raise EvretError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}; "
                         f"known fields are {', '.join(sorted(LABEL_KEYS))}")
    if "label" not in record:
        raise EvretError(f"{where}: field 'label' is missing (true, false, or null while not yet labelled)")
    query_id = record.get("query_id")
    if isinstance(query_id, bool) or not isinstance(query_id, (str, int)) or not str(query_id).strip():
        raise EvretError(f"{where}: field 'query_id' must be a non-empty string")
    query = record.get("query", "")
    if not isinstance(query, str):
        raise EvretError(f"{where}: field 'query' must be a string")
    doc_id = record.get("doc_id")
    if doc_id is not None and (isinstance(doc_id, bool) or not isinstance(doc_id, (str, int))):
        raise EvretError(f"{where}: field 'doc_id' must be a string")
    doc_id = None if doc_id is None else str(doc_id)
    text = record.get("retrieved_text")
    if text is None:
        if doc_id is None:
            raise EvretError(f"{where}: give 'retrieved_text' or a 'doc_id' found in the corpus")
        if corpus is None:
            raise EvretError(f"{where}: 'doc_id' {doc_id!r} without 'retrieved_text' needs a corpus (--corpus)")
        doc = corpus.get(doc_id)
        if doc is None:
            raise EvretError(f"{where}: 'doc_id' {doc_id!r} is not in the corpus")
        text = doc.get("text") if isinstance(doc, Mapping) else doc
    text = _text(text, where, "retrieved_text")
    extra = {k: record[k] for k in ("score", "stratum", "judge", "note") if k in record}
    return LabelledJudgment(query_id=str(query_id), query=query, expected=_expected(record.get("expected"), where),
                            retrieved_text=text, label=_label(record.get("label"), where), doc_id=doc_id,
                            where=where, extra=extra)


def read_labels(path: str | Path, corpus: Mapping[str, Any] | None = None) -> list[LabelledJudgment]:
    """Every labelled judgment of a JSONL file (rows whose label is null included); errors name file and line."""
    path = Path(path)
    out = [label_from_record(record, where, corpus) for _, where, record in iter_json_lines(path, "labels file")]
    if not out:
        raise EvretError(f"{path}: no labelled judgments in the file")
    check_repeats(out)
    return out


def check_repeats(labels: Iterable[LabelledJudgment]) -> None:
    """Refuse a judgment (same query id, expected strings and retrieved text) labelled more than once: labelled
    both ways, the truth is contradictory; labelled the same way twice, it would weigh twice in every agreement
    number (a file concatenated with itself). Rows not yet labelled (null) are not counted."""
    first: dict[tuple[str, tuple[str, ...], str], LabelledJudgment] = {}
    repeats: list[tuple[LabelledJudgment, LabelledJudgment]] = []
    for item in labels:
        if item.label is None:
            continue
        key = (item.query_id, item.expected, item.retrieved_text)
        seen = first.setdefault(key, item)
        if seen is item:
            continue
        if seen.label != item.label:
            raise EvretError(f"{item.where}: labels the judgment of {seen.where} (query {item.query_id!r}, the same "
                             f"expected answer and retrieved text) {str(item.label).lower()}, where "
                             f"{seen.where} says {str(seen.label).lower()}; keep the right one")
        repeats.append((seen, item))
    if repeats:
        seen, item = repeats[0]
        raise EvretError(f"{item.where}: repeats the labelled judgment of {seen.where} ({len(repeats)} repeated "
                         f"row(s) in all); a judgment labelled twice counts twice in every agreement number, so "
                         f"remove the repeats")


def derive_labels(
    dataset: Any,
    qrels: Mapping[str, Mapping[str, float]],
    retrieved: Mapping[str, Sequence[tuple[str, str]]],
) -> list[LabelledJudgment]:
    """Labels from relevance ids: one judgment per (text-labelled query, retrieved document), true when the
    document is relevant (grade > 0) in ``qrels``.

    :param dataset: an :class:`~evret_core.io.datasets.EvaluationDataset` whose queries carry expected answer texts
    :param qrels: query id -> document id -> grade (``read_qrels``)
    :param retrieved: query id -> ranked ``(doc_id, text)`` pairs (a run joined with its corpus)
    """
    out: list[LabelledJudgment] = []
    for example in dataset.queries:
        if not example.expected_answers or example.query_id not in qrels:
            continue
        relevant = {str(d) for d, g in qrels[example.query_id].items() if _positive(g)}
        for rank, (doc_id, text) in enumerate(retrieved.get(example.query_id, ()), start=1):
            if not isinstance(text, str) or not text.strip():
                raise EvretError(f"query {example.query_id!r}: retrieved document {doc_id!r} (rank {rank}) has "
                                 f"no text; deriving labels needs the corpus text of every retrieved document")
            out.append(LabelledJudgment(query_id=example.query_id, query=example.query_text,
                                        expected=tuple(example.expected_answers), retrieved_text=text,
                                        label=str(doc_id) in relevant, doc_id=str(doc_id),
                                        where=f"query {example.query_id!r} rank {rank}"))
    if not out:
        raise EvretError("no judgments to label: no text-labelled query of the dataset has qrels and retrieved "
                         "documents")
    return out


def derive_graded_labels(
    queries: Mapping[str, str],
    qrels: Mapping[str, Mapping[str, float]],
    corpus: Mapping[str, Any],
    sample: int | None = None,
    seed: int = 0,
) -> list[LabelledJudgment]:
    """Graded labels from qrels alone: every judged (query, document) pair with the query's text, the document's
    text and its grade (no results file, no expected answers), in qrels order; ``sample`` keeps that many pairs
    drawn at random with ``seed`` (still in qrels order). A qrels query without a text, or a judged document the
    corpus lacks, is an error naming it."""
    import random

    out: list[LabelledJudgment] = []
    for qid, docs in qrels.items():
        if qid not in queries:
            raise EvretError(f"qrels query {qid!r} has no text in the queries file")
        for doc_id, grade in docs.items():
            doc = corpus.get(doc_id)
            if doc is None:
                raise EvretError(f"qrels query {qid!r}: judged document {doc_id!r} is not in the corpus")
            text = doc.get("text") if isinstance(doc, Mapping) else doc
            value = float(grade)
            if not math.isfinite(value):
                raise EvretError(f"qrels query {qid!r}, document {doc_id!r}: the grade must be a number, got {grade!r}")
            out.append(LabelledJudgment(query_id=str(qid), query=queries[qid], expected=(),
                                        retrieved_text=_text(text, f"corpus document {doc_id!r}", "text"),
                                        label=value > 0, doc_id=str(doc_id), where=f"query {qid!r} doc {doc_id!r}",
                                        grade=value))
    if not out:
        raise EvretError("the qrels judge no (query, document) pair")
    if sample is not None and sample < len(out):
        keep = set(random.Random(seed).sample(range(len(out)), sample))
        out = [item for i, item in enumerate(out) if i in keep]
    return out


def _positive(grade: Any) -> bool:
    try:
        value = float(grade)
    except (TypeError, ValueError):
        return False
    return math.isfinite(value) and value > 0


def labelled_only(labels: Iterable[LabelledJudgment]) -> list[LabelledJudgment]:
    """The judgments whose label is filled in."""
    return [item for item in labels if item.label is not None]
