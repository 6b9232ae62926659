"""The turns of a conversation dataset as the RAG harness's questions (``evret rag --dataset-format
conversations|mtrag``).

:func:`turn_questions` makes one :class:`~evret_core.rag.questions.question_sets.RagQuestion` per turn labelled for
generation (expected answers, relevant ids, or an expected behaviour other than ``answer``): its id is the turn id,
its question the user's message, its tags the turn's plus ``turn_index`` (never the conversation id: MTRAG-UN would
make one slice per question). Beside each question, :class:`TurnInfo` keeps its conversation, its index and its
reference history (the dataset's earlier messages). :func:`query_texts` gives the text each turn is retrieved with
under one query form; the generator always sees the user's message.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ConfigDict, Field

from evret_core.contracts.conversation import RewriteRequest, Turn
from evret_core.contracts.errors import EvretError
from evret_core.conversation.forms import HistoryWindow, form_text
from evret_core.io.conversations import Conversation, ConversationSet, ConversationTurn
from evret_core.rag.questions.question_sets import QuestionSet, RagQuestion

__all__ = ["HISTORY_SOURCES", "TurnInfo", "TurnQuestions", "generated_history", "is_generation_turn",
           "query_texts", "reads_agent_replies", "rewrite_requests", "turn_fields", "turn_questions", "waves"]

HISTORY_SOURCES = ("reference", "generated")
"""Where a turn's history comes from: ``reference``, the dataset's own earlier messages (MTRAG's protocol), or
``generated``, the system's own earlier answers under each condition."""


@dataclass(frozen=True)
class TurnInfo:
    """Where a question of a conversation run comes from: its conversation, the turn's 1-based index in it, and its
    reference history (the dataset's messages before the turn, user and agent, oldest first)."""

    conversation_id: str
    turn_index: int
    history: tuple[Turn, ...] = ()


class TurnQuestions(QuestionSet):
    """A :class:`QuestionSet` made of conversation turns: ``turns`` (question id -> :class:`TurnInfo`) and the
    ``conversations`` they were read from (the query forms read them)."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    turns: dict[str, TurnInfo] = Field(default_factory=dict)
    conversations: ConversationSet | None = None


def is_generation_turn(turn: ConversationTurn) -> bool:
    """Whether ``turn`` is labelled for generation: expected answers, relevant ids, or an expected behaviour other
    than ``answer`` (a turn to refuse, escalate or clarify)."""
    return turn.is_labelled or turn.expected_behaviour != "answer"


def turn_questions(dataset: ConversationSet) -> TurnQuestions:
    """The turns of ``dataset`` labelled for generation, in file order, as questions (see the module)."""
    questions: list[RagQuestion] = []
    turns: dict[str, TurnInfo] = {}
    for conversation in dataset.conversations:
        for turn in conversation.turns:
            if not is_generation_turn(turn):
                continue
            questions.append(_question(turn))
            turns[turn.turn_id] = TurnInfo(conversation.conversation_id, turn.index,
                                           conversation.history(turn.index, "all"))
    if not questions:
        raise EvretError(f"{dataset.name or 'the conversation dataset'}: no turn is labelled for generation "
                         f"(expected answers, relevant ids or an expected behaviour)")
    corpus = {doc_id: {"title": str(record.get("title") or ""), "text": str(record.get("text") or "")}
              for doc_id, record in (dataset.corpus or {}).items()}
    return TurnQuestions(questions=questions, corpus=corpus, name=dataset.name or None,
                         warnings=list(dataset.warnings), turns=turns, conversations=dataset)


def _question(turn: ConversationTurn) -> RagQuestion:
    answers = [list(a) for a in turn.answer_aliases if a] or [[a] for a in turn.expected_answers]
    gold = [doc_id for doc_id, grade in turn.relevance.items() if grade > 0]
    tags = {**{str(k): str(v) for k, v in turn.tags.items()}, "turn_index": str(turn.index)}
    try:
        return RagQuestion(question_id=turn.turn_id, question=turn.user, answers=answers, gold_doc_ids=gold,
                           expected_behaviour=turn.expected_behaviour,  # type: ignore[arg-type]
                           tags=tags)
    except ValueError as exc:  # pydantic's ValidationError: the turn's labels do not make a question
        raise EvretError(f"turn {turn.turn_id!r}: {exc}") from None


def _turn_of(conversation: Conversation, index: int) -> ConversationTurn:
    return next(t for t in conversation.turns if t.index == index)


def query_texts(questions: TurnQuestions, form: str, window: HistoryWindow,
                rewritten: Mapping[str, str | None] | None = None) -> list[str | None]:
    """The text each question is retrieved with under query ``form``, in question order
    (:func:`~evret_core.conversation.forms.form_text`; None, or a blank text: the form has no text for the turn,
    which is then not retrieved)."""
    conversations = {c.conversation_id: c for c in (questions.conversations.conversations
                                                   if questions.conversations is not None else ())}
    out: list[str | None] = []
    for q in questions.questions:
        info = questions.turns[q.question_id]
        conversation = conversations[info.conversation_id]
        try:
            text = form_text(conversation, _turn_of(conversation, info.turn_index), form, window, rewritten)
        except ValueError as exc:
            raise EvretError(str(exc)) from None
        out.append(text if text is None or text.strip() else None)
    return out


def rewrite_requests(questions: TurnQuestions) -> list[RewriteRequest]:
    """One rewrite request per question, in order: the user's message and the turn's reference history."""
    return [RewriteRequest(turn_id=q.question_id, message=q.question, history=questions.turns[q.question_id].history,
                           conversation_id=questions.turns[q.question_id].conversation_id)
            for q in questions.questions]


def turn_fields(questions: Any, question_id: str) -> dict[str, Any]:
    """``conversation_id`` and ``turn_index`` of a question of a conversation run (empty otherwise), for its
    :class:`~evret_core.results.rag_results.QuestionOutcome`."""
    info = questions.turns.get(question_id) if isinstance(questions, TurnQuestions) else None
    return {} if info is None else {"conversation_id": info.conversation_id, "turn_index": info.turn_index}


def waves(questions: TurnQuestions) -> list[list[int]]:
    """The question indexes by wave: wave ``w`` holds the ``w``-th question (0-based, in turn order) of every
    conversation, so that a turn is answered after every earlier turn of its conversation."""
    position: dict[str, int] = {}
    out: dict[int, list[int]] = {}
    for i, q in enumerate(questions.questions):
        conversation = questions.turns[q.question_id].conversation_id
        wave = position.get(conversation, 0)
        position[conversation] = wave + 1
        out.setdefault(wave, []).append(i)
    return [out[w] for w in sorted(out)]


def reads_agent_replies(query_form: str, window: HistoryWindow) -> bool:
    """Whether query ``form``'s text reads the agent's earlier replies (``rewriter``; ``full_history`` with
    ``roles="all"``)."""
    return query_form == "rewriter" or (query_form == "full_history" and window.roles == "all")


def generated_history(questions: TurnQuestions, question_id: str,
                      answer_of: Mapping[str, str | None]) -> tuple[tuple[Turn, ...], int]:
    """The history of question ``question_id`` with the system's own replies: each earlier turn's user message,
    then, for a turn that is a question of the run, its answer text in ``answer_of`` (by question id), else the
    dataset's reply. Returns the history and how many earlier questions had no answer text (they fell back to the
    dataset's reply)."""
    info = questions.turns[question_id]
    conversation = next(c for c in (questions.conversations.conversations if questions.conversations else ())
                        if c.conversation_id == info.conversation_id)
    out: list[Turn] = []
    fallbacks = 0
    for turn in conversation.turns:
        if turn.index >= info.turn_index:
            break
        out.append(Turn("user", turn.user))
        if turn.turn_id in questions.turns:
            text = answer_of.get(turn.turn_id)
            if text is not None and text.strip():
                out.append(Turn("agent", text))
                continue
            fallbacks += 1
        if turn.agent is not None:
            out.append(Turn("agent", turn.agent))
    return tuple(out), fallbacks
