"""RAG question sets: questions with gold documents, expected answers (with aliases) and expected behaviour.

A question set is read from JSON Lines (one question per line, errors name the file and line) or converted from a
SQuAD-format file, whose paragraphs become the corpus. Each answer may be given as a string or as a list of
acceptable strings (the first is canonical), as in the retrieval datasets.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from evret_core.contracts.errors import EvretError
from evret_core.io.corpus import read_corpus
from evret_core.io.dataset_files import BEHAVIOURS as BEHAVIOURS  # the shared schema's, re-exported
from evret_core.io.dataset_files import FIELDS, SquadQuestion, canonical_fields, read_squad, record_id
from evret_core.io.dataset_files import (
    squad_paragraph_id as squad_paragraph_id,  # re-exported: ids in tests, notebooks
)
from evret_core.io.jsonio import iter_json_lines
from evret_core.io.queries import ids_as_strings, tags_as_strings

Behaviour = Literal["answer", "refuse", "escalate", "clarify"]


class RagQuestion(BaseModel):
    """One question of a RAG evaluation.

    ``answers`` holds one list per expected answer: its acceptable strings, the first canonical. ``gold_doc_ids``
    name the corpus documents that hold the answer (the gold context). A question expected to be answered needs
    answers or gold ids; one expected to be refused, escalated or clarified (asking the user which one they mean)
    may have neither. ``metadata`` carries what a dataset knows beyond that (SQuAD: the answer spans with their
    offsets in the gold paragraph, and the plausible wrong answers of an unanswerable question), for perturbations
    that need it. ``counterfactual_answers`` and
    ``counterfactual_passages`` are the question's own fake answer(s) and fact-altered passages (counterfactual
    robustness sets such as RGB's): the ``counterfactual`` family plants these instead of a value of its own.
    """

    model_config = ConfigDict(extra="forbid")

    question_id: str
    question: str
    answers: list[list[str]] = Field(default_factory=list)
    gold_doc_ids: list[str] = Field(default_factory=list)
    expected_behaviour: Behaviour = "answer"
    tags: dict[str, str] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)
    counterfactual_answers: list[str] = Field(default_factory=list)
    counterfactual_passages: list[str] = Field(default_factory=list)

    @field_validator("counterfactual_answers", "counterfactual_passages", mode="before")
    @classmethod
    def _strings(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("counterfactual_answers", "counterfactual_passages")
    @classmethod
    def _no_empty_strings(cls, value: list[str]) -> list[str]:
        if any(not v.strip() for v in value):
            raise ValueError("holds an empty string")
        return value

    @field_validator("question")
    @classmethod
    def _non_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("question text is empty")
        return value

    @field_validator("answers", mode="before")
    @classmethod
    def _answers_as_lists(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [value]
        if isinstance(value, (list, tuple)):
            return [[a] if isinstance(a, str) else a for a in value]
        return value

    @field_validator("answers")
    @classmethod
    def _no_empty_answer(cls, value: list[list[str]]) -> list[list[str]]:
        for i, variants in enumerate(value):
            if not variants or not all(v.strip() for v in variants):
                raise ValueError(f"answer {i} is empty (give a non-empty string or list of strings)")
        return value

    @field_validator("gold_doc_ids", mode="before")
    @classmethod
    def _ids_as_strings(cls, value: Any) -> Any:
        return value if isinstance(value, Mapping) else ids_as_strings(value)

    @field_validator("tags", mode="before")
    @classmethod
    def _tags_as_strings(cls, value: Any) -> Any:
        return tags_as_strings(value)

    @model_validator(mode="after")
    def _has_labels(self) -> RagQuestion:
        if self.expected_behaviour == "answer" and not self.answers and not self.gold_doc_ids:
            raise ValueError("a question expected to be answered needs answers or gold_doc_ids")
        return self

    @property
    def canonical_answers(self) -> list[str]:
        """The first acceptable string of each answer."""
        return [variants[0] for variants in self.answers]

    @property
    def answer_strings(self) -> list[str]:
        """Every acceptable string of every answer, in order, without repeats."""
        return list(dict.fromkeys(s for variants in self.answers for s in variants))

    @property
    def fake_answer_is_an_answer(self) -> bool:
        """Whether one of the question's own fake answers (``counterfactual_answers``) is, normalised as SQuAD
        normalises, one of its acceptable answers: adopting it could not be told from answering right, so the
        ``counterfactual`` family leaves the question out."""
        from evret_core.rag.scores.answers import normalize_answer

        answers = {normalize_answer(a) for a in self.answer_strings}
        return any(normalize_answer(f) in answers for f in self.counterfactual_answers)


# the shared schema's fields (evret_core.io.dataset_files.FIELDS) that RagQuestion names otherwise
_RAG_NAMES = {"query_id": "question_id", "query": "question", "expected_answers": "answers",
              "relevant_doc_ids": "gold_doc_ids"}
# field name in a file -> model field (several spellings are accepted for the same thing)
_FIELDS = {spelling: _RAG_NAMES.get(field, field) for field, spellings in FIELDS.items() for spelling in spellings}


def _spelling(record: Mapping[str, Any], field: str) -> str:
    """The name ``record`` gives ``field`` (``id``, ``query_id``...), for error messages."""
    return next((key for key in record if _FIELDS.get(key) == field), field)


def question_from_record(record: Any, where: str) -> RagQuestion:
    """A :class:`RagQuestion` from one decoded record; ``where`` ("file:line") names it in errors."""
    if not isinstance(record, Mapping):
        raise EvretError(f"{where}: expected a JSON object, got {type(record).__name__}")
    fields = canonical_fields(record, where)
    del fields["_spelling"]
    data: dict[str, Any] = {_RAG_NAMES.get(field, field): value for field, value in fields.items()}
    text = data.get("question")
    if not isinstance(text, str):
        raise EvretError(f"{where}: field 'question' is missing or not a string")
    behaviour = data.get("expected_behaviour", "answer")
    if behaviour not in BEHAVIOURS:
        raise EvretError(f"{where}: expected_behaviour must be one of {', '.join(BEHAVIOURS)}, got {behaviour!r}")
    qid = data.get("question_id")
    data["question_id"] = record_id(None if qid == "" else qid, text, where, _spelling(record, "question_id"))
    try:
        return RagQuestion.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'record'}: {err['msg']}" for err in exc.errors()
        )
        raise EvretError(f"{where}: {problems}") from None


class QuestionSet(BaseModel):
    """Questions with unique ids plus the corpus (doc id -> ``{"title", "text"}``) their gold ids point into;
    ``warnings``: what the reader found wrong in the file without refusing it (``evret rag`` prints them)."""

    model_config = ConfigDict(extra="forbid")

    questions: list[RagQuestion]
    corpus: dict[str, dict[str, str]] = Field(default_factory=dict)
    name: str | None = None
    warnings: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_ids(self) -> QuestionSet:
        seen: set[str] = set()
        for q in self.questions:
            if q.question_id in seen:
                raise ValueError(f"duplicate question id {q.question_id!r}")
            seen.add(q.question_id)
        return self

    def __len__(self) -> int:
        return len(self.questions)

    def text_of(self, doc_id: str) -> str | None:
        """The corpus text of ``doc_id`` (title and text joined as the retrievers index them), or None."""
        record = self.corpus.get(doc_id)
        if record is None:
            return None
        title = record.get("title") or ""
        return f"{title}\n{record['text']}" if title else record["text"]

    def fingerprint(self) -> dict[str, Any]:
        """SHA-256 hashes of the questions (every field, by id) and of the corpus (every document's id, title and
        text, by id), as read: a results file records them (``config["question_set"]``), so that a report can tell
        a question set or corpus edited since the run from the one it used (key order, whitespace between fields
        and the order of the lines do not count)."""
        import hashlib
        import json

        def digest(rows: Iterable[Any]) -> str:
            h = hashlib.sha256()
            for row in rows:
                h.update(json.dumps(row, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
                h.update(b"\n")
            return h.hexdigest()

        by_id = sorted(self.questions, key=lambda q: q.question_id)
        return {"name": self.name, "questions": len(self.questions), "documents": len(self.corpus),
                "questions_sha256": digest(q.model_dump(mode="json") for q in by_id),
                "corpus_sha256": digest([doc_id, self.corpus[doc_id].get("title") or "", self.corpus[doc_id]["text"]]
                                        for doc_id in sorted(self.corpus))}

    def check_gold_ids(self) -> list[str]:
        """Gold ids that the corpus does not hold, as ``"question: id"``: empty means every gold id resolves.

        Without a corpus nothing can be resolved: a set with gold ids raises :class:`EvretError` (load it with
        its corpus), rather than answer that they resolve; a set without gold ids returns ``[]``."""
        if not self.corpus:
            with_ids = [q.question_id for q in self.questions if q.gold_doc_ids]
            if with_ids:
                raise EvretError(f"{len(with_ids)} question(s) have gold ids (e.g. {with_ids[0]!r}) but the question "
                                 "set has no corpus to check them against; load it with its corpus")
            return []
        return [f"{q.question_id}: {d}" for q in self.questions for d in q.gold_doc_ids if d not in self.corpus]

    @classmethod
    def from_records(cls, records: Iterable[Any], corpus: Mapping[str, Mapping[str, str]] | None = None,
                     name: str | None = None) -> QuestionSet:
        questions = [question_from_record(r, f"record {i}") for i, r in enumerate(records, start=1)]
        return _build(questions, corpus, name, "records")

    @classmethod
    def from_jsonl(cls, path: str | Path, corpus: str | Path | Mapping[str, Mapping[str, str]] | None = None
                   ) -> QuestionSet:
        """One question per line (blank lines skipped); ``corpus`` a JSONL corpus file or a mapping."""
        path = Path(path)
        questions: list[RagQuestion] = []
        lines: dict[str, str] = {}
        for _lineno, where, record in iter_json_lines(path, what="question file"):
            question = question_from_record(record, where)
            if question.question_id in lines:
                raise EvretError(f"{where}: duplicate question id {question.question_id!r} "
                                 f"(first at {lines[question.question_id]})")
            lines[question.question_id] = where
            questions.append(question)
        docs = read_corpus(corpus) if isinstance(corpus, (str, Path)) else corpus
        built = _build(questions, docs, path.stem, str(path))
        built.warnings += fake_answer_warnings(questions, lines)
        return built

    @classmethod
    def from_squad(cls, path: str | Path) -> QuestionSet:
        """Convert a SQuAD 1.1/2.0 JSON file (see :func:`squad_to_questions`)."""
        return squad_to_questions(path)

    @classmethod
    def load(cls, path: str | Path, corpus: str | Path | None = None) -> QuestionSet:
        """By suffix: ``.jsonl`` question files (with ``corpus``), ``.json`` SQuAD-format files."""
        suffix = Path(path).suffix.lower()
        if suffix == ".jsonl":
            return cls.from_jsonl(path, corpus)
        if suffix == ".json":
            if corpus is not None:
                raise EvretError(f"{path}: a SQuAD-format file carries its own corpus (its paragraphs); "
                                 f"drop --corpus")
            return cls.from_squad(path)
        raise EvretError(f"{path}: unknown question-set format {suffix or '(no suffix)'!r}; use .jsonl or a "
                         f"SQuAD-format .json")


def fake_answer_warnings(questions: Iterable[RagQuestion], lines: Mapping[str, str]) -> list[str]:
    """One warning for the questions whose own fake answer is one of their answers
    (:attr:`RagQuestion.fake_answer_is_an_answer`), with their count and the first one's ``file:line`` (``lines``:
    question id -> where it was read)."""
    flagged = [q for q in questions if q.fake_answer_is_an_answer]
    if not flagged:
        return []
    first = lines.get(flagged[0].question_id, f"question {flagged[0].question_id!r}")
    return [f"{len(flagged)} record(s) give a fake answer equal to one of their answers (first at {first}): the "
            f"counterfactual condition leaves them out (adopting the fake answer could not be told from answering "
            f"right)"]


def _build(questions: list[RagQuestion], corpus: Mapping[str, Mapping[str, str]] | None, name: str | None,
           source: str) -> QuestionSet:
    if not questions:
        raise EvretError(f"{source}: the question set has no questions")
    docs = {str(k): {"title": str(v.get("title") or ""), "text": str(v["text"])} for k, v in (corpus or {}).items()}
    try:
        qs = QuestionSet(questions=questions, corpus=docs, name=name)
    except ValidationError as exc:
        raise EvretError(f"{source}: {exc.errors()[0]['msg']}") from None
    missing = qs.check_gold_ids() if docs else []  # a set read without its corpus is checked where one is needed
    if missing:
        raise EvretError(f"{source}: {len(missing)} gold id(s) are not in the corpus, e.g. {missing[0]}")
    return qs


def squad_to_questions(path: str | Path) -> QuestionSet:
    """A SQuAD-format file as a question set: the corpus is its paragraphs (id ``<title>-<n>``, spaces as
    underscores; an article whose title collides with an earlier one's gets ``<title>~<i>-<n>``, ``i`` its index in
    ``data``: see :func:`~evret_core.io.dataset_files.parse_squad`), each question's gold document is its paragraph,
    its answers are the distinct gold answer texts (each an alternative of the one answer, so the first gold text
    is canonical), and an ``is_impossible`` question (a JSON boolean) is expected to be refused. Tags: ``article``
    (the title) and ``answerable`` (``yes``/``no``). Metadata: ``answer_spans`` and ``plausible_answers``, each a
    list of ``[text, answer_start]`` as in the file."""
    path = Path(path)
    squad = read_squad(path)
    questions = [_squad_question(q) for q in squad.questions]
    return _build(questions, squad.corpus, path.stem, str(path))


def _squad_question(q: SquadQuestion) -> RagQuestion:
    record = {
        "question_id": q.question_id,
        "question": q.question,
        "answers": [] if q.impossible else [q.answers],
        "gold_doc_ids": [q.doc_id],
        "expected_behaviour": "refuse" if q.impossible else "answer",
        "tags": {"article": q.title, "answerable": "no" if q.impossible else "yes"},
        "metadata": {"answer_spans": q.spans, "plausible_answers": q.plausible},
    }
    return question_from_record(record, q.where)
