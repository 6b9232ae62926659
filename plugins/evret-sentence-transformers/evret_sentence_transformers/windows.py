"""The windows of a retrieved text that the semantic judge compares an expected answer with.

A short answer ("1832", "the Duke of Normandy") compared with a whole passage's embedding says nothing: the passage
is about many things. So the answer is compared with windows of the passage about its own size, and the best
window counts:

- an answer at least half as long as the passage: the passage itself (one window);
- an answer of ``n >=`` :data:`SENTENCE_WORDS` words: runs of whole sentences of at least ``n`` words, one starting
  at each sentence (so a single sentence when sentences are longer than the answer);
- a shorter answer of ``n`` words: sliding windows of ``n`` words inside each sentence (a window never spans two
  sentences), stepping ``ceil(n / 2)`` words, the last one flush with the sentence's end; a sentence of ``n`` words
  or fewer is one window.

Windows keep the passage's own words and punctuation, joined by single spaces.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["SENTENCE_WORDS", "sentences", "text_windows"]

#: answers of this many words or more are compared with whole sentences
SENTENCE_WORDS = 8
# a sentence ends at . ! or ? (and any closing quote or bracket) followed by space and an upper-case letter,
# a digit or an opening quote
_SENTENCE_END = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"')\]]))\s+(?=[\"'(\[]?[A-Z0-9])")


# a full stop after these (or after a single letter, an initial) does not end a sentence: "St. Elizabeth's flood"
ABBREVIATIONS = frozenset("st mr mrs ms dr mt jr sr no vs ca fig gen col lt capt rev prof".split())


def sentences(text: str) -> list[str]:
    """The sentences of ``text``, whitespace collapsed; a text without sentence ends is one sentence."""
    out: list[str] = []
    glue = False
    for part in _SENTENCE_END.split(text):
        words = part.split()
        if not words:
            continue
        if glue and out:
            out[-1] = f"{out[-1]} {' '.join(words)}"
        else:
            out.append(" ".join(words))
        last = words[-1].rstrip(".").lower()
        glue = words[-1].endswith(".") and (last in ABBREVIATIONS or (len(last) == 1 and last.isalpha()))
    return out


@lru_cache(maxsize=65536)
def text_windows(text: str, answer_words: int) -> tuple[str, ...]:
    """The distinct windows of ``text`` for an answer of ``answer_words`` words, in text order (module docs)."""
    words = text.split()
    if not words:
        return ()
    if answer_words * 2 >= len(words):
        return (" ".join(words),)
    out: list[str] = []
    if answer_words >= SENTENCE_WORDS:
        parts = sentences(text)
        for start in range(len(parts)):
            count, end = 0, start
            while end < len(parts) and count < answer_words:
                count += len(parts[end].split())
                end += 1
            if count < answer_words:
                break  # the runs from here on are shorter than the answer, and inside the last full one
            out.append(" ".join(parts[start:end]))
        return tuple(dict.fromkeys(out)) or (" ".join(words),)
    size = max(1, answer_words)
    stride = (size + 1) // 2
    for sentence in sentences(text):
        tokens = sentence.split()
        if len(tokens) <= size:
            out.append(sentence)
            continue
        last = len(tokens) - size
        starts = list(range(0, last + 1, stride))
        if starts[-1] != last:
            starts.append(last)
        out.extend(" ".join(tokens[s : s + size]) for s in starts)
    return tuple(dict.fromkeys(out))
