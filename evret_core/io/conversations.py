"""Conversation datasets: :class:`ConversationSet` (conversations of turns, with the corpus their labels name),
:class:`Conversation` and :class:`ConversationTurn` (a user message, the agent's reply when known, and the turn's
labels: expected answer texts or relevant ids, an expected behaviour, tags).

A turn is labelled for retrieval when it has expected answers or relevant ids; the other turns are history only:
kept (later turns read them), never scored. docs/conversations.md documents the JSON Lines format.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from evret_core.contracts.conversation import Turn
from evret_core.io.queries import QueryExample

__all__ = ["Conversation", "ConversationSet", "ConversationTurn"]


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
