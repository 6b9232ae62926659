"""The query forms of a conversation turn: the text each labelled turn is retrieved with.

- ``last_turn``: the turn's own user message;
- ``full_history``: the :class:`HistoryWindow` of earlier messages, oldest first, one per line, then the message;
- ``rewrite``: the standalone rewrite given in the data (missing when the turn has none);
- ``rewriter``: a registered rewriter's output (missing when it returned None).

A missing text leaves the turn unmeasured under that form; it is never replaced by another form's text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from evret_core.contracts.conversation import RewriteRequest
from evret_core.contracts.errors import EvretError, did_you_mean
from evret_core.io.conversations import Conversation, ConversationTurn

__all__ = ["FORMS", "HistoryWindow", "check_forms", "default_forms", "form_text", "form_texts", "history_text",
           "rewrite_requests", "unknown_form"]

FORMS: tuple[str, ...] = ("last_turn", "full_history", "rewrite", "rewriter")
"""Every query form, in the order runs and reports list them."""


def unknown_form(form: str) -> str:
    """The message for a query form that is not one of :data:`FORMS` (with the one it most likely meant)."""
    return f"unknown query form {form!r}{did_you_mean(form, FORMS)}; use last_turn, full_history, rewrite or rewriter"


def check_forms(forms: Sequence[str], has_rewriter: bool, turns_with_rewrite: int, labelled: int) -> list[str]:
    """``forms`` (the ``--forms`` of a conversation run) checked before any paid work: each known and given once,
    ``rewriter`` only with a rewriter (``has_rewriter``: ``--rewriter`` given), ``rewrite`` only when some of the
    ``labelled`` turns have a rewrite in the data (``turns_with_rewrite`` of them); an :class:`EvretError` whose
    message names the fix otherwise. Returns the forms in the order given."""
    out: list[str] = []
    for form in forms:
        if form not in FORMS:
            raise EvretError(unknown_form(form))
        if form in out:
            raise EvretError(f"query form {form!r} is given twice in --forms")
        out.append(form)
    if not out:
        raise EvretError("--forms names no query form; use last_turn, full_history, rewrite or rewriter")
    if "rewriter" in out and not has_rewriter:
        raise EvretError("form 'rewriter' needs --rewriter NAME (llm, carry-terms or a plugin's)")
    if "rewrite" in out and turns_with_rewrite == 0:
        others = ",".join(f for f in out if f not in ("rewrite", "rewriter"))
        instead = f"{others},rewriter" if others else "rewriter"
        raise EvretError(f"form 'rewrite' needs a 'rewrite' on the turns; none of the {labelled} labelled turns has "
                         f"one: drop it from --forms or use --forms {instead} --rewriter llm")
    return out


def default_forms(has_rewriter: bool, turns_with_rewrite: int) -> list[str]:
    """The forms of a run without ``--forms``: ``last_turn``, ``full_history``, ``rewrite`` when at least one
    labelled turn has a rewrite, ``rewriter`` when a rewriter is given."""
    return ["last_turn", "full_history", *(["rewrite"] if turns_with_rewrite else []),
            *(["rewriter"] if has_rewriter else [])]


@dataclass(frozen=True)
class HistoryWindow:
    """Which earlier messages the ``full_history`` form holds: the ``turns`` turns before the current one (None:
    all of them), their user messages (``roles="all"``: each followed by the agent's reply when known), then the
    current message, at most ``max_words`` words in all (whitespace-split). Over the budget, the oldest messages
    are dropped whole, then the oldest remaining one loses its first words; the current message is never cut (one
    longer than ``max_words`` is kept whole, alone)."""

    turns: int | None = None
    roles: str = "user"
    max_words: int = 256

    def __post_init__(self) -> None:
        if self.turns is not None and (isinstance(self.turns, bool) or not isinstance(self.turns, int)
                                       or self.turns < 0):
            raise ValueError(f"history turns must be a non-negative integer or None, got {self.turns!r}")
        if self.roles not in ("user", "all"):
            raise ValueError(f"history roles must be 'user' or 'all', got {self.roles!r}")
        if isinstance(self.max_words, bool) or not isinstance(self.max_words, int) or self.max_words < 1:
            raise ValueError(f"history max_words must be a positive integer, got {self.max_words!r}")


def history_text(conversation: Conversation, turn: ConversationTurn, window: HistoryWindow) -> str:
    """The ``full_history`` text of ``turn``: the window's earlier messages, oldest first, one per line, then the
    turn's message (see :class:`HistoryWindow`)."""
    earlier = [t for t in conversation.turns if t.index < turn.index]
    if window.turns is not None:
        earlier = earlier[len(earlier) - window.turns:] if window.turns else []
    messages: list[str] = []
    for t in earlier:
        messages.append(t.user)
        if window.roles == "all" and t.agent is not None:
            messages.append(t.agent)
    left = window.max_words - len(turn.user.split())
    kept: list[str] = []
    for message in reversed(messages):  # newest first: the oldest are dropped
        if left <= 0:
            break
        words = message.split()
        if len(words) > left:
            kept.append(" ".join(words[len(words) - left:]))
            break
        kept.append(" ".join(words))
        left -= len(words)
    return "\n".join([*reversed([m for m in kept if m]), turn.user])


def form_texts(conversations: Sequence[Conversation], forms: Sequence[str], window: HistoryWindow,
               rewritten: Mapping[str, str | None] | None = None) -> dict[str, dict[str, str | None]]:
    """form -> turn id -> the text the turn is retrieved with under that form (None: missing), for the labelled
    turns of ``conversations`` in file order; ``rewritten`` holds the ``rewriter`` form's texts by turn id."""
    unknown = [f for f in forms if f not in FORMS]
    if unknown:
        raise ValueError(unknown_form(unknown[0]))
    out: dict[str, dict[str, str | None]] = {form: {} for form in forms}
    for conversation in conversations:
        for turn in conversation.turns:
            if not turn.is_labelled:
                continue
            for form in forms:
                out[form][turn.turn_id] = form_text(conversation, turn, form, window, rewritten)
    return out


def form_text(conversation: Conversation, turn: ConversationTurn, form: str, window: HistoryWindow,
              rewritten: Mapping[str, str | None] | None = None) -> str | None:
    """The text ``turn`` is retrieved with under query ``form`` (None: missing): ``last_turn`` the user's message,
    ``full_history`` :func:`history_text` over ``window``, ``rewrite`` the turn's rewrite in the data,
    ``rewriter`` the ``rewritten`` text by turn id."""
    if form == "last_turn":
        return turn.user
    if form == "full_history":
        return history_text(conversation, turn, window)
    if form == "rewrite":
        return turn.rewrite
    if form == "rewriter":
        return None if rewritten is None else rewritten.get(turn.turn_id)
    raise ValueError(unknown_form(form))


def rewrite_requests(conversations: Sequence[Conversation]) -> list[RewriteRequest]:
    """One request per labelled turn, in file order, with every earlier message (user and agent when known) as
    its history."""
    return [RewriteRequest(turn_id=turn.turn_id, message=turn.user, history=conversation.history(turn.index, "all"),
                           conversation_id=conversation.conversation_id)
            for conversation in conversations for turn in conversation.turns if turn.is_labelled]
