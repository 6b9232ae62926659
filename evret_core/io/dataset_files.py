"""Reading dataset files into queries: JSON records, CSV rows, BEIR folders and SQuAD-format files, with errors that
name the file and line (:class:`~evret_core.io.datasets.EvaluationDataset`'s ``from_*`` readers call these; the RAG
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

from evret_core.contracts.errors import EvretError, describe_validation_error, did_you_mean
from evret_core.io.corpus import read_corpus
from evret_core.io.jsonio import iter_json_lines, loads_json, read_text
from evret_core.io.queries import QueryExample, derive_query_id

__all__ = ["BEHAVIOURS", "FIELDS", "SquadFile", "SquadQuestion", "beir_examples", "canonical_fields",
           "collect_examples", "csv_examples", "csv_list", "csv_tags", "example_from_record", "parse_squad",
           "read_beir_qrels", "read_squad", "record_id", "squad_examples", "squad_paragraph_id"]


# The one field table of dataset records, read by `evret evaluate` (the readers here) and `evret rag` (question
# sets): each field and every spelling a file may give it, its own name first. docs/index.md documents it.
FIELDS: dict[str, tuple[str, ...]] = {
    "query_id": ("query_id", "question_id", "id"),
    "query": ("query", "question", "query_text"),
    "expected_answers": ("expected_answers", "answers"),
    "relevant_doc_ids": ("relevant_doc_ids", "gold_doc_ids"),
    "tags": ("tags",),
    "expected_behaviour": ("expected_behaviour", "expected_behavior"),
    "metadata": ("metadata",),
    "counterfactual_answers": ("counterfactual_answers",),
    "counterfactual_passages": ("counterfactual_passages",),
}
_SPELLINGS = {spelling: field for field, spellings in FIELDS.items() for spelling in spellings}
BEHAVIOURS: tuple[str, ...] = ("answer", "refuse", "escalate", "clarify")
"""The values of ``expected_behaviour``: what a RAG system should do with the question (``clarify``: ask the user
what they mean, as for an underspecified turn of a conversation)."""


def canonical_fields(record: Mapping[str, Any], where: str) -> dict[str, Any]:
    """``record``'s values under their fields' names (:data:`FIELDS`), with the spelling each was given
    under ``"_spelling"``; an unknown field, or two spellings of one field, is an error naming ``where``."""
    fields: dict[str, Any] = {}
    given: dict[str, str] = {}
    for key, value in record.items():
        field = _SPELLINGS.get(key)
        if field is None:
            raise EvretError(f"{where}: unknown field {key!r}{did_you_mean(key, _SPELLINGS)}; known fields are "
                             f"{', '.join(sorted(_SPELLINGS))}")
        if field in given:
            raise EvretError(f"{where}: fields {given[field]!r} and {key!r} are two spellings of one field "
                             f"({', '.join(FIELDS[field])}); keep one")
        fields[field], given[field] = value, key
    fields["_spelling"] = given
    return fields


def example_from_record(record: Any, where: str) -> QueryExample | None:
    """The query of one dataset record; None for a question expected to be refused or escalated that has no
    answers nor gold ids (a RAG question with nothing for retrieval to find)."""
    if not isinstance(record, Mapping):
        raise EvretError(f"{where}: expected a JSON object, got {type(record).__name__}")
    fields = canonical_fields(record, where)
    spelling = fields.pop("_spelling")
    text = fields.get("query")
    if not isinstance(text, str):
        raise EvretError(f"{where}: field {spelling.get('query', 'query')!r} is missing or not a string")
    behaviour = fields.get("expected_behaviour", "answer")
    if behaviour not in BEHAVIOURS:
        raise EvretError(f"{where}: field {spelling['expected_behaviour']!r} must be {', '.join(BEHAVIOURS[:-1])} or "
                         f"{BEHAVIOURS[-1]}, got {behaviour!r}")
    # metadata and counterfactual_* serve evret rag's generation tests; retrieval has no use for them
    if behaviour != "answer" and not fields.get("expected_answers") and not fields.get("relevant_doc_ids"):
        return None
    answers = fields.get("expected_answers")
    if answers is None:
        answers = []
    elif isinstance(answers, str):
        answers = [answers]
    query_id = fields.get("query_id")
    if not isinstance(answers, list):
        raise EvretError(f"{where}: field {spelling.get('expected_answers', 'expected_answers')!r} must be a text or "
                         f"a list (of texts or lists of texts)")
    data = {
        "query_id": record_id(query_id, text, where, spelling.get("query_id", "query_id")),
        "query_text": text,
        "expected_answers": answers,
        "relevant_doc_ids": fields.get("relevant_doc_ids"),
        "tags": fields.get("tags") or {},
    }
    try:
        return QueryExample.model_validate(data)
    except ValidationError as exc:
        raise EvretError(f"{where}: {describe_validation_error(exc)}") from None


def record_id(value: Any, text: str, where: str, field: str) -> str:
    """A record's id as a string: a string as it is, an integer as its decimal string (``0`` is an id like any
    other); absent or null, an id derived from ``text`` (:func:`~evret_core.io.queries.derive_query_id`). A boolean or
    any other type is an error naming ``where`` and ``field``, never its ``str()``."""
    if value is None:
        return derive_query_id(text)
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        shown = json.dumps(value, ensure_ascii=False, default=str)
        raise EvretError(f"{where}: field {field!r} must be a string or an integer, got "
                         f"{shown if len(shown) <= 40 else shown[:40] + '...'}")
    return str(value)


_DELIMITERS = (",", ";", "\t", "|")


def _csv_delimiter(header: str) -> str:
    """The delimiter of a CSV file, from its header line: the first of , ; tab | that gives a query column, else
    the one that splits the header into the most columns (``,`` on a tie)."""
    best, most = ",", 1
    for delimiter in _DELIMITERS:
        names = next(csv.reader([header], delimiter=delimiter), [])
        if any(_SPELLINGS.get(name) == "query" for name in names):
            return delimiter
        if len(names) > most:
            best, most = delimiter, len(names)
    return best


def csv_examples(path: Path, notes: list[str] | None = None) -> list[QueryExample]:
    """The queries of a CSV dataset file (see :meth:`EvaluationDataset.from_csv`), with ``,``, ``;``, tab or ``|``
    between columns (told by the header); errors name the file and line. ``notes`` as for
    :func:`collect_examples`."""
    path = Path(path)
    lines = read_text(path).splitlines()
    delimiter = _csv_delimiter(lines[0] if lines else "")
    reader = csv.DictReader(lines, delimiter=delimiter)
    names = list(reader.fieldnames or [])
    spelling = canonical_fields(dict.fromkeys(names), f"{path}:1")["_spelling"]  # unknown or repeated columns
    if "query" not in spelling:
        shown = "tab" if delimiter == "\t" else repr(delimiter)
        raise EvretError(f"{path}:1: the CSV header (read with {shown} as the delimiter: {', '.join(names)}) needs "
                         f"a 'query' column (or {', '.join(repr(s) for s in FIELDS['query'][1:])})")
    columns = {field: spelling.get(field) for field in ("expected_answers", "relevant_doc_ids", "tags")}

    def rows() -> Iterator[tuple[str, str, dict[str, Any]]]:
        for row in reader:
            where = f"{path}:{reader.line_num}"
            record: dict[str, Any] = {k: v for k, v in row.items() if k is not None and v not in (None, "")}
            if None in row:
                raise EvretError(f"{where}: more fields than the header has")
            answers, ids, tags = columns["expected_answers"], columns["relevant_doc_ids"], columns["tags"]
            if answers is not None and answers in record:
                record[answers] = csv_list(record[answers], where, answers, nested=True)
            if ids is not None and ids in record:
                record[ids] = csv_list(record[ids], where, ids)
            if tags is not None and tags in record:
                record[tags] = csv_tags(record[tags], where)
            yield where, f"on line {reader.line_num}", record

    return collect_examples(rows(), path, notes)


def beir_examples(folder: Path, split: str) -> tuple[list[QueryExample], dict[str, dict[str, Any]]]:
    """The judged queries of a BEIR folder's split and its corpus (see :meth:`EvaluationDataset.from_beir`)."""
    qrels_path = folder / "qrels" / f"{split}.tsv"
    if not qrels_path.is_file():
        raise EvretError(f"{folder}: not a BEIR folder with a {split!r} split (no qrels/{split}.tsv)")
    judgments = read_beir_qrels(qrels_path)
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


def read_beir_qrels(path: Path) -> dict[str, dict[str, float]]:
    """A BEIR qrels TSV file (``query-id corpus-id score``, a header line allowed) as query id -> {doc id:
    grade}; errors name the file and line."""
    qrels_path = Path(path)
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
    return judgments


def collect_examples(rows: Iterable[tuple[str, str, Any]], source: str | Path,
                     notes: list[str] | None = None) -> list[QueryExample]:
    """Examples from ``(where, mention, record)`` rows: ``where`` starts each error message, ``mention`` ("on line
    3") is how a later duplicate of the row's query_id points back to it. No rows at all is an error. Questions
    expected to be refused or escalated that have no labels are left out, counted in a note added to ``notes``."""
    examples: list[QueryExample] = []
    seen: dict[str, str] = {}
    left_out = 0
    for where, mention, record in rows:
        example = example_from_record(record, where)
        if example is None:
            left_out += 1
            continue
        if example.query_id in seen:
            raise EvretError(f"{where}: duplicate query_id {example.query_id!r} (first {seen[example.query_id]})")
        seen[example.query_id] = mention
        examples.append(example)
    if not examples:
        raise EvretError(f"{source}: the dataset has no queries"
                         + (f" ({left_out} question(s) to refuse or escalate, without labels)" if left_out else ""))
    if left_out and notes is not None:
        notes.append(f"{left_out} question(s) expected to be refused or escalated, with no answers nor gold ids, "
                     f"left out: retrieval has nothing to find for them (evret rag scores their behaviour)")
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
