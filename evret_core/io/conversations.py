"""Conversation datasets: :class:`ConversationSet` (conversations of turns, with the corpus their labels name),
:class:`Conversation` and :class:`ConversationTurn` (a user message, the agent's reply when known, and the turn's
labels: expected answer texts or relevant ids, an expected behaviour, tags).

A turn is labelled for retrieval when it has expected answers or relevant ids, for generation also when its expected
behaviour is not ``answer``; the other turns are history only: kept (later turns read them), never scored.
:meth:`ConversationSet.from_jsonl` reads the JSON Lines format docs/conversations.md documents (with a qrels file
keyed by turn id kept apart), :meth:`ConversationSet.to_jsonl` writes it back.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evret_core.contracts.conversation import Turn
from evret_core.contracts.errors import EvretError, describe_validation_error, did_you_mean
from evret_core.io.corpus import read_corpus
from evret_core.io.dataset_files import BEHAVIOURS, record_id
from evret_core.io.jsonio import iter_json_lines, read_text
from evret_core.io.outputs import write_output
from evret_core.io.queries import QueryExample
from evret_core.io.trec import read_qrels_file

__all__ = ["CONVERSATION_FIELDS", "TURN_FIELDS", "Conversation", "ConversationSet",
           "ConversationTurn", "is_conversation_file", "read_turn_qrels"]

# The fields of a conversation record and of each of its turns, with every spelling a file may give them, the
# field's own name first (as io/dataset_files.py's FIELDS). docs/conversations.md documents both tables.
CONVERSATION_FIELDS: dict[str, tuple[str, ...]] = {
    "conversation_id": ("conversation_id", "id"),
    "turns": ("turns",),
    "tags": ("tags",),
    "metadata": ("metadata",),
}
TURN_FIELDS: dict[str, tuple[str, ...]] = {
    "user": ("user", "query", "question"),
    "agent": ("agent", "assistant", "response"),
    "turn_id": ("turn_id",),
    "rewrite": ("rewrite",),
    "expected_answers": ("expected_answers", "answers"),
    "relevant_doc_ids": ("relevant_doc_ids", "gold_doc_ids"),
    "expected_behaviour": ("expected_behaviour", "expected_behavior"),
    "tags": ("tags",),
    "metadata": ("metadata",),
}


@dataclass(frozen=True)
class ConversationTurn:
    """One turn of a conversation: the user's message, the agent's reply that followed (None when the data has
    none), a standalone ``rewrite`` of the message given in the data, and the turn's labels (``answer_aliases`` as :class:`~evret_core.io.queries.QueryExample` holds them: each list starts with its
    expected answer). ``index`` is the
    turn's 1-based position in its conversation; ``tags`` already include the conversation's (the turn's own win)."""

    turn_id: str
    index: int
    user: str
    agent: str | None = None
    rewrite: str | None = None
    expected_answers: tuple[str, ...] = ()
    answer_aliases: tuple[tuple[str, ...], ...] = ()
    relevant_doc_ids: tuple[str, ...] | Mapping[str, float] | None = None
    expected_behaviour: str = "answer"
    tags: Mapping[str, str] = field(default_factory=dict)
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def relevance(self) -> dict[str, float]:
        """Relevant id -> grade (1.0 for a plain list of ids); empty without ids."""
        ids = self.relevant_doc_ids
        if ids is None:
            return {}
        if isinstance(ids, Mapping):
            return {str(k): float(v) for k, v in ids.items()}
        return dict.fromkeys(ids, 1.0)

    @property
    def is_id_labelled(self) -> bool:
        """Whether the turn's relevant ids are given (it is scored without judging)."""
        return self.relevant_doc_ids is not None

    @property
    def is_labelled(self) -> bool:
        """Whether the turn is scored for retrieval: it has expected answers or relevant ids."""
        return bool(self.expected_answers) or self.relevant_doc_ids is not None

    def query(self, query_id: str, text: str) -> QueryExample:
        """The turn as one retrieval query: ``text`` (the turn's message in one query form) with the turn's labels
        and no tags (a conversation run slices turns itself)."""
        ids = self.relevant_doc_ids
        return QueryExample(query_id=query_id, query_text=text, expected_answers=list(self.expected_answers),
                            answer_aliases=[list(a) for a in self.answer_aliases],
                            relevant_doc_ids=(dict(ids) if isinstance(ids, Mapping)
                                              else None if ids is None else list(ids)))


@dataclass(frozen=True)
class Conversation:
    """A conversation: its turns in order, the tags every turn inherits, and free metadata."""

    conversation_id: str
    turns: tuple[ConversationTurn, ...]
    tags: Mapping[str, str] = field(default_factory=dict)
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def history(self, index: int, roles: str = "all") -> tuple[Turn, ...]:
        """The messages before turn ``index`` (1-based), oldest first: each earlier turn's user message and, with
        ``roles="all"``, the agent's reply after it when the data has one (``roles="user"``: user messages only)."""
        if roles not in ("user", "all"):
            raise ValueError(f"roles must be 'user' or 'all', got {roles!r}")
        out: list[Turn] = []
        for turn in self.turns:
            if turn.index >= index:
                break
            out.append(Turn("user", turn.user))
            if roles == "all" and turn.agent is not None:
                out.append(Turn("agent", turn.agent))
        return tuple(out)


@dataclass(frozen=True)
class ConversationSet:
    """Conversations read from one dataset, with the corpus their ids name (doc id -> record with ``text`` and
    ``title``, as :class:`~evret_core.io.datasets.EvaluationDataset`'s; None when the retriever brings its own), the dataset's ``name``, and the notes and warnings its reader says once per run."""

    conversations: tuple[Conversation, ...]
    corpus: Mapping[str, Mapping[str, Any]] | None = None
    name: str = ""
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    def labelled_turns(self) -> list[tuple[Conversation, ConversationTurn]]:
        """Every turn labelled for retrieval with its conversation, in file order."""
        return [(c, t) for c in self.conversations for t in c.turns if t.is_labelled]

    def text_of(self, doc_id: str) -> str | None:
        """The corpus text of ``doc_id``, or None."""
        record = None if self.corpus is None else self.corpus.get(doc_id)
        return None if record is None else str(record.get("text", ""))

    def __len__(self) -> int:
        return len(self.conversations)

    def turn_count(self) -> int:
        """How many turns the conversations hold, labelled or not."""
        return sum(len(c.turns) for c in self.conversations)

    @classmethod
    def from_jsonl(cls, path: str | Path, corpus: str | Path | Mapping[str, Mapping[str, Any]] | None = None,
                   qrels: str | Path | None = None) -> ConversationSet:
        """Read a conversation JSONL file (one conversation per line; docs/conversations.md), with ``corpus`` (a
        JSONL corpus file or a mapping) and ``qrels`` (a BEIR TSV or TREC qrels file keyed by turn id) when
        given. Every error names ``file:line`` and the turn (``turns[i]``)."""
        return _read_conversations(Path(path), _corpus_of(corpus), None if qrels is None else Path(qrels))

    def records(self) -> list[dict[str, Any]]:
        """Each conversation as the JSON object :meth:`to_jsonl` writes (canonical field names; a turn's tags
        only where they differ from its conversation's)."""
        return [_conversation_record(c) for c in self.conversations]

    def to_jsonl(self, path: str | Path, option: str = "") -> None:
        """Write the conversations as a conversation JSONL file (:meth:`from_jsonl` reads it back equal; the
        corpus is not written)."""
        write_output(path, [json.dumps(r, ensure_ascii=False) + "\n" for r in self.records()], option)

    def content_hash(self) -> str:
        """SHA-256 (hex) over each conversation's canonical JSON (sorted keys, ``ensure_ascii=False``) and a
        newline: equal for equal conversations, whatever file or importer they came from."""
        digest = hashlib.sha256()
        for record in self.records():
            digest.update((json.dumps(record, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8"))
        return digest.hexdigest()


def is_conversation_file(path: str | Path) -> bool:
    """Whether ``path`` is a ``.jsonl`` file whose first record is a JSON object with ``turns``."""
    path = Path(path)
    if path.suffix.lower() != ".jsonl" or not path.is_file():
        return False
    try:
        with path.open(encoding="utf-8-sig") as handle:
            for line in handle:
                if line.strip():
                    record = json.loads(line)
                    return isinstance(record, dict) and "turns" in record
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return False
    return False


def read_turn_qrels(path: Path) -> tuple[dict[str, dict[str, float]], dict[str, int]]:
    """A qrels file keyed by turn id: BEIR TSV (``query-id corpus-id score``, a header line allowed) when its first
    line has three tab-separated fields, else TREC qrels (four columns). Returns the judgments and the line each
    query id first appears on."""
    judgments = read_qrels_file(path)
    lines = read_text(path, what="qrels file").split("\n")
    first_line: dict[str, int] = {}
    for lineno, line in enumerate(lines, start=1):
        parts = line.split()
        if parts:
            first_line.setdefault(parts[0], lineno)
    return judgments, first_line


def _corpus_of(corpus: str | Path | Mapping[str, Mapping[str, Any]] | None) -> Mapping[str, Mapping[str, Any]] | None:
    if corpus is None or isinstance(corpus, Mapping):
        return corpus
    return read_corpus(corpus)


def _spellings(table: Mapping[str, tuple[str, ...]]) -> dict[str, str]:
    return {spelling: name for name, spellings in table.items() for spelling in spellings}


_CONVERSATION_SPELLINGS = _spellings(CONVERSATION_FIELDS)
_TURN_SPELLINGS = _spellings(TURN_FIELDS)


def _fields(record: Mapping[str, Any], spellings: Mapping[str, str], table: Mapping[str, tuple[str, ...]],
            where: str) -> tuple[dict[str, Any], dict[str, str]]:
    """``record``'s values under their fields' names, and the spelling each was given in; an unknown field or two
    spellings of one field is an error naming ``where``."""
    fields: dict[str, Any] = {}
    given: dict[str, str] = {}
    for key, value in record.items():
        name = spellings.get(key)
        if name is None:
            raise EvretError(f"{where}: unknown field {key!r}{did_you_mean(key, spellings)}; known fields are "
                             f"{', '.join(sorted(spellings))}")
        if name in given:
            raise EvretError(f"{where}: fields {given[name]!r} and {key!r} are two spellings of one field "
                             f"({', '.join(table[name])}); keep one")
        fields[name], given[name] = value, key
    return fields, given


def _tags(value: Any, where: str, field: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or any(isinstance(v, (dict, list)) for v in value.values()):
        raise EvretError(f"{where}: field {field!r} must be an object of tag names and texts")
    return {str(k): str(v) for k, v in value.items()}


def _metadata(value: Any, where: str, field: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise EvretError(f"{where}: field {field!r} must be an object")
    return dict(value)


def _optional_text(value: Any, where: str, field: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise EvretError(f"{where}: field {field!r} must be a non-empty string")
    return value


def _read_turn(record: Any, where: str, conversation_id: str, n: int,
               conversation_tags: Mapping[str, str]) -> ConversationTurn:
    """Turn ``n`` (1-based) of a conversation; ``where`` is ``file:line: turns[i]``."""
    if not isinstance(record, Mapping):
        raise EvretError(f"{where}: expected a JSON object, got {type(record).__name__}")
    fields, given = _fields(record, _TURN_SPELLINGS, TURN_FIELDS, where)
    user = fields.get("user")
    if not isinstance(user, str) or not user.strip():
        raise EvretError(f"{where}: field {given.get('user', 'user')!r} is missing or not a non-empty string")
    turn_id = record_id(fields.get("turn_id"), user, where, given.get("turn_id", "turn_id")) \
        if fields.get("turn_id") is not None else f"{conversation_id}:{n}"
    if not turn_id.strip():
        raise EvretError(f"{where}: field {given['turn_id']!r} is empty")
    behaviour = fields.get("expected_behaviour", "answer")
    if behaviour not in BEHAVIOURS:
        raise EvretError(f"{where}: field {given['expected_behaviour']!r} must be {', '.join(BEHAVIOURS[:-1])} or "
                         f"{BEHAVIOURS[-1]}, got {behaviour!r}")
    answers = fields.get("expected_answers")
    if answers is None:
        answers = []
    elif isinstance(answers, str):
        answers = [answers]
    elif not isinstance(answers, list):
        raise EvretError(f"{where}: field {given['expected_answers']!r} must be a text or a list (of texts or lists "
                         "of texts)")
    ids = fields.get("relevant_doc_ids")
    if ids is not None and not isinstance(ids, (str, list, Mapping)):
        raise EvretError(f"{where}: field {given['relevant_doc_ids']!r} must be a list of ids or an object of id -> "
                         "grade")
    if isinstance(ids, (list, Mapping)) and not ids:
        raise EvretError(f"{where}: field {given['relevant_doc_ids']!r} is empty; leave it out for a turn kept as "
                         "history")
    tags = {**conversation_tags, **_tags(fields.get("tags"), where, given.get("tags", "tags"))}
    try:  # the labels are checked as a single query's are
        query = QueryExample.model_validate({"query_id": turn_id, "query_text": user, "expected_answers": answers,
                                             "relevant_doc_ids": ids, "tags": tags})
    except ValidationError as exc:
        raise EvretError(f"{where}: {describe_validation_error(exc)}") from None
    relevant = query.relevant_doc_ids
    return ConversationTurn(
        turn_id=turn_id, index=n, user=user,
        agent=_optional_text(fields.get("agent"), where, given.get("agent", "agent")),
        rewrite=_optional_text(fields.get("rewrite"), where, given.get("rewrite", "rewrite")),
        expected_answers=tuple(query.expected_answers),
        answer_aliases=tuple(tuple(a) for a in query.answer_aliases),
        relevant_doc_ids=(None if relevant is None else dict(relevant) if isinstance(relevant, dict)
                          else tuple(relevant)),
        expected_behaviour=str(behaviour), tags=tags,
        metadata=_metadata(fields.get("metadata"), where, given.get("metadata", "metadata")))


def _read_conversations(path: Path, corpus: Mapping[str, Mapping[str, Any]] | None,
                        qrels_path: Path | None) -> ConversationSet:
    conversations: list[Conversation] = []
    first_at: dict[str, str] = {}
    turn_at: dict[str, str] = {}
    for _lineno, where, record in iter_json_lines(path, what="conversation file"):
        if not isinstance(record, Mapping):
            raise EvretError(f"{where}: expected a JSON object, got {type(record).__name__}")
        fields, given = _fields(record, _CONVERSATION_SPELLINGS, CONVERSATION_FIELDS, where)
        if fields.get("conversation_id") is None:
            raise EvretError(f"{where}: field 'conversation_id' is missing")
        conversation_id = record_id(fields["conversation_id"], "", where, given["conversation_id"])
        if not conversation_id.strip():
            raise EvretError(f"{where}: field {given['conversation_id']!r} is empty")
        if conversation_id in first_at:
            raise EvretError(f"{where}: duplicate conversation_id {conversation_id!r} (first at "
                             f"{first_at[conversation_id]})")
        first_at[conversation_id] = where
        turns_value = fields.get("turns")
        if not isinstance(turns_value, list) or not turns_value:
            raise EvretError(f"{where}: field 'turns' must be a non-empty list of turns")
        tags = _tags(fields.get("tags"), where, given.get("tags", "tags"))
        turns: list[ConversationTurn] = []
        for i, turn_record in enumerate(turns_value):
            turn_where = f"{where}: turns[{i}]"
            turn = _read_turn(turn_record, turn_where, conversation_id, i + 1, tags)
            if turn.turn_id in turn_at:
                raise EvretError(f"{turn_where}: duplicate turn_id {turn.turn_id!r} (first at "
                                 f"{turn_at[turn.turn_id]})")
            turn_at[turn.turn_id] = turn_where.replace(": turns[", " turns[")
            turns.append(turn)
        conversations.append(Conversation(conversation_id, tuple(turns), tags,
                                          _metadata(fields.get("metadata"), where, given.get("metadata", "metadata"))))
    if not conversations:
        raise EvretError(f"{path}: the file has no conversations")
    if qrels_path is not None:
        conversations = _with_qrels(conversations, qrels_path, path, turn_at)
    if not any(_has_labels(t) for c in conversations for t in c.turns):
        raise EvretError(f"{path}: no conversation has a labelled turn")
    dataset = ConversationSet(tuple(conversations), corpus, name=path.stem)
    return ConversationSet(dataset.conversations, corpus, dataset.name, tuple(_notes(dataset)),
                           tuple(_corpus_warnings(dataset, turn_at)))


def _has_labels(turn: ConversationTurn) -> bool:
    """Labelled for retrieval (answers or ids) or for generation (also an expected behaviour other than answer)."""
    return turn.is_labelled or turn.expected_behaviour != "answer"


def _with_qrels(conversations: list[Conversation], qrels_path: Path, path: Path,
                turn_at: Mapping[str, str]) -> list[Conversation]:
    """The conversations with each judged turn's ``relevant_doc_ids`` from the qrels file."""
    judgments, line_of = read_turn_qrels(qrels_path)
    for query_id in judgments:
        if query_id not in turn_at:
            raise EvretError(f"{qrels_path}:{line_of.get(query_id, 1)}: query {query_id!r} is not a turn of {path.name}")
    out: list[Conversation] = []
    for conversation in conversations:
        turns = []
        for turn in conversation.turns:
            judged = judgments.get(turn.turn_id)
            if judged is not None:
                if turn.relevant_doc_ids is not None:
                    raise EvretError(f"{turn_at[turn.turn_id].replace(' turns[', ': turns[')}: relevant_doc_ids "
                                     f"given here and in {qrels_path}: keep one")
                turn = replace(turn, relevant_doc_ids=dict(judged))
            turns.append(turn)
        out.append(replace(conversation, turns=tuple(turns)))
    return out


def _notes(dataset: ConversationSet) -> list[str]:
    total = dataset.turn_count()
    unlabelled = sum(not _has_labels(t) for c in dataset.conversations for t in c.turns)
    if not unlabelled:
        return []
    return [f"{unlabelled} of {total} turns carry no labels: kept as history, not scored"]


def _corpus_warnings(dataset: ConversationSet, turn_at: Mapping[str, str]) -> list[str]:
    """One warning for the relevant ids the given corpus does not hold: their count and the first one's place."""
    if dataset.corpus is None:
        return []
    missing = [(turn.turn_id, doc_id) for c in dataset.conversations for turn in c.turns
               for doc_id in turn.relevance if doc_id not in dataset.corpus]
    if not missing:
        return []
    turn_id, doc_id = missing[0]
    return [f"{len(missing)} relevant id(s) of the turns are not in the corpus (first: {doc_id!r} at "
            f"{turn_at.get(turn_id, turn_id)}); those turns can never retrieve them"]


def _conversation_record(conversation: Conversation) -> dict[str, Any]:
    record: dict[str, Any] = {"conversation_id": conversation.conversation_id}
    if conversation.tags:
        record["tags"] = dict(conversation.tags)
    if conversation.metadata:
        record["metadata"] = dict(conversation.metadata)
    record["turns"] = [_turn_record(t, conversation.tags) for t in conversation.turns]
    return record


def _turn_record(turn: ConversationTurn, inherited: Mapping[str, str]) -> dict[str, Any]:
    record: dict[str, Any] = {"turn_id": turn.turn_id, "user": turn.user}
    if turn.agent is not None:
        record["agent"] = turn.agent
    if turn.rewrite is not None:
        record["rewrite"] = turn.rewrite
    if turn.expected_answers:
        aliases = turn.answer_aliases
        record["expected_answers"] = [list(aliases[i]) if i < len(aliases) and len(aliases[i]) > 1 else text
                                      for i, text in enumerate(turn.expected_answers)]
    ids = turn.relevant_doc_ids
    if ids is not None:
        record["relevant_doc_ids"] = ({str(k): _grade(v) for k, v in ids.items()} if isinstance(ids, Mapping)
                                      else list(ids))
    if turn.expected_behaviour != "answer":
        record["expected_behaviour"] = turn.expected_behaviour
    own = {k: v for k, v in turn.tags.items() if inherited.get(k) != v}
    if own:
        record["tags"] = own
    if turn.metadata:
        record["metadata"] = dict(turn.metadata)
    return record


def _grade(value: Any) -> float:
    grade = float(value)
    if not math.isfinite(grade):
        raise EvretError(f"grade {value!r} is not a finite number")
    return grade
