"""Reading dataset files into queries: JSON records, CSV rows, BEIR folders and SQuAD-format files, with errors that
name the file and line (:class:`~evret_core.data.models.EvaluationDataset`'s ``from_*`` readers call these; the RAG
question sets read SQuAD through :func:`read_squad` too, so both see the same paragraph ids and the same checks)."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evret_core.data.corpus import iter_json_lines, loads_json, read_corpus, read_text
from evret_core.data.queries import QueryExample, derive_query_id
from evret_core.errors import EvretError, describe_validation_error

__all__ = ["SquadFile", "SquadQuestion", "beir_examples", "collect_examples", "csv_examples", "csv_list", "csv_tags",
           "example_from_record", "parse_squad", "read_squad", "record_id", "squad_examples", "squad_paragraph_id"]


_RECORD_KEYS = {"query_id", "query", "query_text", "expected_answers", "relevant_doc_ids", "tags"}


def example_from_record(record: Any, where: str) -> QueryExample:
    if not isinstance(record, Mapping):
        raise EvretError(f"{where}: expected a JSON object, got {type(record).__name__}")
    unknown = set(record) - _RECORD_KEYS
    if unknown:
        raise EvretError(
            f"{where}: unknown field(s) {', '.join(sorted(unknown))}; "
            f"known fields are {', '.join(sorted(_RECORD_KEYS))}"
        )
    text = record.get("query", record.get("query_text"))
    if not isinstance(text, str):
        raise EvretError(f"{where}: field 'query' is missing or not a string")
    answers = record.get("expected_answers")
    if answers is None:
        answers = []
    elif isinstance(answers, str):
        answers = [answers]
    query_id = record.get("query_id")
    if not isinstance(answers, list):
        raise EvretError(f"{where}: field 'expected_answers' must be a text or a list (of texts or lists of texts)")
    data = {
        "query_id": record_id(query_id, text, where, "query_id"),
        "query_text": text,
        "expected_answers": answers,
        "relevant_doc_ids": record.get("relevant_doc_ids"),
        "tags": record.get("tags") or {},
    }
    try:
        return QueryExample.model_validate(data)
    except ValidationError as exc:
        raise EvretError(f"{where}: {describe_validation_error(exc)}") from None


def record_id(value: Any, text: str, where: str, field: str) -> str:
    """A record's id as a string: a string as it is, an integer as its decimal string (``0`` is an id like any
    other); absent or null, an id derived from ``text`` (:func:`~evret_core.data.queries.derive_query_id`). A boolean or
    any other type is an error naming ``where`` and ``field``, never its ``str()``."""
    if value is None:
        return derive_query_id(text)
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        shown = json.dumps(value, ensure_ascii=False, default=str)
        raise EvretError(f"{where}: field {field!r} must be a string or an integer, got "
                         f"{shown if len(shown) <= 40 else shown[:40] + '...'}")
    return str(value)


def csv_examples(path: Path) -> list[QueryExample]:
    """The queries of a CSV dataset file (see :meth:`EvaluationDataset.from_csv`); errors name the file and line."""
    path = Path(path)
    text = read_text(path)
    reader = csv.DictReader(text.splitlines())
    if reader.fieldnames is None or ("query" not in reader.fieldnames and "query_text" not in reader.fieldnames):
        raise EvretError(f"{path}:1: the CSV header needs a 'query' column")

    def rows() -> Iterator[tuple[str, str, dict[str, Any]]]:
        for row in reader:
            where = f"{path}:{reader.line_num}"
            record: dict[str, Any] = {k: v for k, v in row.items() if k is not None and v not in (None, "")}
            if None in row:
                raise EvretError(f"{where}: more fields than the header has")
            if "expected_answers" in record:
                record["expected_answers"] = csv_list(record["expected_answers"], where, "expected_answers",
                                                       nested=True)
            if "relevant_doc_ids" in record:
                record["relevant_doc_ids"] = csv_list(record["relevant_doc_ids"], where, "relevant_doc_ids")
            if "tags" in record:
                record["tags"] = csv_tags(record["tags"], where)
            yield where, f"on line {reader.line_num}", record

    return collect_examples(rows(), path)


def beir_examples(folder: Path, split: str) -> tuple[list[QueryExample], dict[str, dict[str, Any]]]:
    """The judged queries of a BEIR folder's split and its corpus (see :meth:`EvaluationDataset.from_beir`)."""
    qrels_path = folder / "qrels" / f"{split}.tsv"
    if not qrels_path.is_file():
        raise EvretError(f"{folder}: not a BEIR folder with a {split!r} split (no qrels/{split}.tsv)")
    judgments: dict[str, dict[str, float]] = {}
    for lineno, line in enumerate(read_text(qrels_path).splitlines(), start=1):
        fields = line.strip().split("\t")
        if lineno == 1 and not fields[-1].lstrip("-").replace(".", "", 1).isdigit():
            continue  # the header: query-id corpus-id score
        if not line.strip():
            continue
        if len(fields) != 3:
            raise EvretError(f"{qrels_path}:{lineno}: expected 3 tab-separated fields, got {len(fields)}")
        try:
            grade = float(fields[2])
        except ValueError:
            raise EvretError(f"{qrels_path}:{lineno}: score {fields[2]!r} is not a number") from None
        if not math.isfinite(grade):
            raise EvretError(f"{qrels_path}:{lineno}: score {fields[2]!r} is not a finite number")
        if not fields[0].strip() or not fields[1].strip():
            raise EvretError(f"{qrels_path}:{lineno}: empty query id or document id")
        judgments.setdefault(fields[0], {})[fields[1]] = grade
    corpus: dict[str, dict[str, Any]] = dict(read_corpus(folder / "corpus.jsonl"))
    examples: list[QueryExample] = []
    for where, record in _beir_records(folder / "queries.jsonl"):
        qid = str(record["_id"])
        if qid not in judgments:
            continue
        try:
            examples.append(QueryExample(query_id=qid, query_text=str(record.get("text") or ""),
                                         relevant_doc_ids=judgments[qid]))
        except ValidationError as exc:
            raise EvretError(f"{where}: {describe_validation_error(exc)}") from None
    if not examples:
        raise EvretError(f"{folder}: no query of queries.jsonl has judgments in qrels/{split}.tsv")
    return examples, corpus


def collect_examples(rows: Iterable[tuple[str, str, Any]], source: str | Path) -> list[QueryExample]:
    """Examples from ``(where, mention, record)`` rows: ``where`` starts each error message, ``mention`` ("on line
    3") is how a later duplicate of the row's query_id points back to it. No rows at all is an error."""
    examples: list[QueryExample] = []
    seen: dict[str, str] = {}
    for where, mention, record in rows:
        example = example_from_record(record, where)
        if example.query_id in seen:
            raise EvretError(f"{where}: duplicate query_id {example.query_id!r} (first {seen[example.query_id]})")
        seen[example.query_id] = mention
        examples.append(example)
    if not examples:
        raise EvretError(f"{source}: the dataset has no queries")
    return examples


def csv_list(value: str, where: str, key: str, nested: bool = False) -> list[Any]:
    """A CSV cell as a list: a JSON list, or ``|``-separated texts. With ``nested`` an item may itself be a list
    of texts (an answer with aliases), kept as a list."""
    value = value.strip()
    if value.startswith("["):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            raise EvretError(f"{where}: column {key!r} is not a valid JSON list") from None
        if not isinstance(parsed, list):
            raise EvretError(f"{where}: column {key!r} is not a valid JSON list")
        return [v if nested and isinstance(v, list) else str(v) for v in parsed]
    return [part.strip() for part in value.split("|") if part.strip()]


def csv_tags(value: str, where: str) -> dict[str, str]:
    value = value.strip()
    if value.startswith("{"):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            raise EvretError(f"{where}: column 'tags' is not a valid JSON object") from None
        return {str(k): str(v) for k, v in parsed.items()}
    tags: dict[str, str] = {}
    for part in value.split(";"):
        if not part.strip():
            continue
        if "=" not in part:
            raise EvretError(f"{where}: tag {part.strip()!r} is not key=value")
        key, _, val = part.partition("=")
        tags[key.strip()] = val.strip()
    return tags


def _beir_records(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(file:line, record) for each JSON line of a BEIR file; every record needs an ``_id``."""
    for _lineno, where, record in iter_json_lines(path):
        if not isinstance(record, dict) or "_id" not in record:
            raise EvretError(f"{where}: expected a JSON object with an '_id' field")
        yield where, record


# -- SQuAD-format files ------------------------------------------------------------------------------------------


def squad_paragraph_id(title: str, index: int) -> str:
    """The corpus id of paragraph ``index`` (0-based) of the article ``title``: ``"Normans-0"``, spaces as
    underscores. An article whose title collides with an earlier one's is named by its key instead (see
    :func:`parse_squad`)."""
    return f"{title.replace(' ', '_')}-{index}"


@dataclass(frozen=True)
class SquadQuestion:
    """One question of a SQuAD-format file, checked. ``answers``: its distinct non-blank gold texts in file order
    (empty when ``impossible``); ``spans`` and ``plausible``: ``[text, answer_start]`` of each gold / plausible
    answer, as in the file; ``doc_id``: its paragraph's corpus id; ``where``: ``file: data[i].paragraphs[j].qas[k]``."""

    question_id: str
    question: str
    impossible: bool
    answers: list[str]
    spans: list[list[Any]]
    plausible: list[list[Any]]
    doc_id: str
    title: str
    where: str


@dataclass(frozen=True)
class SquadFile:
    """A SQuAD-format file: its paragraphs as a corpus (id -> ``{"title", "text"}``) and its questions in order."""

    corpus: dict[str, dict[str, str]]
    questions: list[SquadQuestion]


def read_squad(path: str | Path) -> SquadFile:
    """Read and check a SQuAD 1.1 / 2.0 file (see :func:`parse_squad`); errors name the file and the place."""
    path = Path(path)
    return parse_squad(loads_json(read_text(path, what="SQuAD file"), path), path)


def parse_squad(data: Any, path: str | Path) -> SquadFile:
    """The paragraphs and questions of decoded SQuAD-format JSON.

    Paragraph ids are ``<key>-<n>``, the key being the article's title with spaces as underscores; an article whose
    key an earlier article already has (the same title twice, or ``New York`` beside ``New_York``) gets
    ``<key>~<i>``, ``i`` its index in ``data``, so every paragraph keeps its own id and the first article's ids do
    not depend on later ones. ``is_impossible`` must be a JSON boolean (absent: false, as in SQuAD 1.1); a question
    id a string or an integer (absent or empty: derived from the question text); anything else is an error naming
    ``data[i].paragraphs[j].qas[k]`` and the field."""
    articles = data.get("data") if isinstance(data, Mapping) else None
    if not isinstance(articles, list):
        raise EvretError(f"{path}: not a SQuAD-format file (no top-level 'data' list)")
    corpus: dict[str, dict[str, str]] = {}
    questions: list[SquadQuestion] = []
    keys: set[str] = set()
    for a, article in enumerate(articles):
        paragraphs = article.get("paragraphs") if isinstance(article, Mapping) else None
        if not isinstance(paragraphs, list):
            raise EvretError(f"{path}: data[{a}] has no 'paragraphs' list")
        title = str(article.get("title") or f"article{a}")
        key = title.replace(" ", "_")
        if key in keys:  # a colliding title: the later article's paragraphs must not replace the earlier's
            key = f"{key}~{a}"
            while key in keys:
                key += f"~{a}"
        keys.add(key)
        for p, paragraph in enumerate(paragraphs):
            where = f"{path}: data[{a}].paragraphs[{p}]"
            if not isinstance(paragraph, Mapping) or not isinstance(paragraph.get("context"), str):
                raise EvretError(f"{where}: no 'context' string")
            doc_id = squad_paragraph_id(key, p)
            corpus[doc_id] = {"title": title, "text": paragraph["context"]}
            qas = paragraph.get("qas") or []
            if not isinstance(qas, list):
                raise EvretError(f"{where}: 'qas' must be a list of questions")
            for i, qa in enumerate(qas):
                questions.append(_squad_question(qa, doc_id, title, f"{where}.qas[{i}]"))
    return SquadFile(corpus, questions)


def _squad_question(qa: Any, doc_id: str, title: str, where: str) -> SquadQuestion:
    if not isinstance(qa, Mapping) or not isinstance(qa.get("question"), str):
        raise EvretError(f"{where}: no 'question' string")
    impossible = qa.get("is_impossible", False)
    if not isinstance(impossible, bool):
        raise EvretError(f"{where}: field 'is_impossible' must be true or false (a JSON boolean), got "
                         f"{json.dumps(impossible, ensure_ascii=False, default=str)[:40]}")
    qid = qa.get("id")
    question_id = record_id(None if qid == "" else qid, qa["question"], where, "id")
    spans = _squad_answers(qa, "answers", where)
    plausible = _squad_answers(qa, "plausible_answers", where)
    variants = list(dict.fromkeys(text for text, _ in spans if text.strip()))
    if not impossible and not variants:
        raise EvretError(f"{where}: an answerable question with no answer text")
    return SquadQuestion(question_id, qa["question"], impossible, [] if impossible else variants, spans, plausible,
                         doc_id, title, where)


def _squad_answers(qa: Mapping[str, Any], field: str, where: str) -> list[list[Any]]:
    """``[text, answer_start]`` of each answer in ``qa[field]``; an answer without a text string is an error."""
    answers = qa.get(field) or []
    if not isinstance(answers, list):
        raise EvretError(f"{where}: '{field}' must be a list of {{\"text\", \"answer_start\"}} objects")
    out = []
    for m, answer in enumerate(answers):
        if not isinstance(answer, Mapping) or not isinstance(answer.get("text"), str):
            raise EvretError(f"{where}.{field}[{m}]: no 'text' string")
        out.append([answer["text"], answer.get("answer_start")])
    return out


def squad_examples(data: Any, path: str | Path) -> tuple[list[QueryExample], dict[str, dict[str, Any]], list[str]]:
    """A SQuAD-format file as a retrieval dataset: the answerable questions as queries (their distinct gold texts
    the aliases of one expected answer; tag ``article``), the paragraphs as the corpus, and notes on what was left
    out: unanswerable questions have no expected answer to retrieve, so they are not scored."""
    squad = parse_squad(data, path)
    examples: list[QueryExample] = []
    seen: dict[str, str] = {}
    for q in squad.questions:
        if q.impossible:
            continue
        if q.question_id in seen:
            raise EvretError(f"{q.where}: duplicate question id {q.question_id!r} (first at {seen[q.question_id]})")
        seen[q.question_id] = q.where.split(": ", 1)[-1]
        try:
            examples.append(QueryExample.model_validate({"query_id": q.question_id, "query_text": q.question,
                                                         "expected_answers": [q.answers],
                                                         "tags": {"article": q.title}}))
        except ValidationError as exc:
            raise EvretError(f"{q.where}: {describe_validation_error(exc)}") from None
    skipped = sum(q.impossible for q in squad.questions)
    notes = [f"{path}: {skipped} unanswerable question(s) (is_impossible) left out: they have no expected answer "
             f"to retrieve"] if skipped else []
    if not examples:
        raise EvretError(f"{path}: the dataset has no queries (no answerable question)")
    return examples, dict(squad.corpus), notes
