"""The ``carry-terms`` rewriter: an offline, deterministic baseline that carries words of the previous user messages
into a follow-up message that leans on them.

A message is rewritten when the conversation has earlier user messages and the message holds an anaphor (a whole
word of ``anaphors``, any case) or fewer than ``min_content_words`` content words
(:func:`evret_core.text.content_words`): up to ``max_terms`` words of the previous ``turns`` user messages (newest
message first, each message's words in order, original case, stop words out, words already in the message out,
each word once) are appended to it. Any other message, a first turn among them, is returned unchanged. It is a floor
for an LLM rewriter to beat, not a gain of its own (docs/query-forms.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evret_core.contracts.conversation import Rewriter, RewriteRequest
from evret_core.contracts.errors import EvretError
from evret_core.limits import check_int
from evret_core.text import STOPWORDS, WORD, content_words

__all__ = ["DEFAULT_ANAPHORS", "CarryTermsRewriter"]

DEFAULT_ANAPHORS: tuple[str, ...] = tuple(
    "it its they them their theirs this that these those he she his her him there such one ones".split())
"""The words that make a message lean on the conversation before it."""

_LIMIT = 1000


class CarryTermsRewriter(Rewriter):
    """Appends words of the previous user messages to a follow-up that needs them; see the module.

    :param turns: how many previous user messages the words come from (newest first).
    :param max_terms: the most words appended.
    :param min_content_words: a message with fewer content words than this is rewritten even without an anaphor.
    :param anaphors: the words that mark a message as a follow-up (a list, or one string of space-separated words).
    """

    name = "carry-terms"
    deterministic = True

    def __init__(self, turns: int = 1, max_terms: int = 6, min_content_words: int = 4,
                 anaphors: Sequence[str] | str | None = None) -> None:
        owner = "rewriter 'carry-terms': option"
        self.turns = check_int(turns, f"{owner} 'turns'", 1, _LIMIT)
        self.max_terms = check_int(max_terms, f"{owner} 'max_terms'", 1, _LIMIT)
        self.min_content_words = check_int(min_content_words, f"{owner} 'min_content_words'", 0, _LIMIT)
        words: Sequence[Any] = DEFAULT_ANAPHORS if anaphors is None else (
            anaphors.split() if isinstance(anaphors, str) else anaphors)
        if isinstance(words, (bytes, dict)) or not all(isinstance(w, str) and WORD.fullmatch(w) for w in words):
            raise EvretError(f"{owner} 'anaphors' must be words (a list, or one string of space-separated words), "
                             f"got {anaphors!r}")
        self.anaphors: tuple[str, ...] = tuple(dict.fromkeys(w.lower() for w in words))

    def needs_history(self, message: str) -> bool:
        """Whether ``message`` leans on the conversation: it holds an anaphor or has too few content words."""
        anaphors = set(self.anaphors)
        return (any(w.lower() in anaphors for w in WORD.findall(message))
                or len(content_words(message)) < self.min_content_words)

    def rewrite(self, request: RewriteRequest) -> str | None:
        message = request.message
        earlier = [t.text for t in request.history if t.role == "user"]
        if not earlier or not self.needs_history(message):
            return message
        seen = {w.lower() for w in WORD.findall(message)}
        terms: list[str] = []
        for text in reversed(earlier[-self.turns:]):  # newest first
            for word in WORD.findall(text):
                low = word.lower()
                if low in STOPWORDS or low in seen:
                    continue
                seen.add(low)
                terms.append(word)
                if len(terms) == self.max_terms:
                    break
            if len(terms) == self.max_terms:
                break
        return f"{message} {' '.join(terms)}" if terms else message

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "turns": self.turns, "max_terms": self.max_terms,
                "min_content_words": self.min_content_words, "anaphors": list(self.anaphors)}
