"""The semantic judge's lexical prefilter: which windows are worth an encode at a high threshold.

At the default threshold (0.94) a window matches an answer only when it is nearly the answer's own words (plurals,
possessives, punctuation inside words): then it holds most of the answer's character trigrams. A window that
holds fewer than :data:`MIN_COVER` of them is not encoded, and counts as not matching. This is a heuristic, not a
proof: it was checked on real data (``benchmarks/semantic.py --cases``; docs/benchmarks.md, "Semantic judge:
encodes saved"), where the highest cosine among the windows it skipped was 0.913 ("Switzerland" against
"Swiss"), below the 0.93 from which it is used (:data:`MIN_THRESHOLD`). Below that threshold paraphrases share
fewer characters, so every window is encoded. The prefilter can only turn a match into a non-match, never the
reverse, and it never touches ``batch_score``, which stays exact.

Long answers (:data:`LONG_ANSWER_WORDS` words or more: whole abstracts, paragraphs) hold common trigrams that any
text of the same field shares, so trigrams alone keep nearly every window. For them a window must also hold
:data:`MIN_STEM_COVER` of the answer's distinct word stems (:func:`stems`: the first :data:`STEM_CHARS` characters
of each normalised word, so that plurals, possessives and other endings still count). Measured
(docs/benchmarks.md, "Long answers: the word-stem rule"): on SciFact's abstracts, non-matching pairs held at most
0.49 of the stems and the best cosine among the windows the rule skipped was 0.815; on edited copies of abstracts
and of sentences (words replaced, dropped, suffixed, misspelt, shuffled; ``benchmarks/semantic.py
--stem-margins``), every copy at cosine 0.93 or more held at least 0.53 of them. Also a heuristic, applied with the trigram rule (at a threshold of 0.93 or more).
"""

from __future__ import annotations

from functools import lru_cache

from evret_core.sdk import normalized

__all__ = ["LONG_ANSWER_WORDS", "MIN_COVER", "MIN_STEM_COVER", "MIN_THRESHOLD", "STEM_CHARS", "cover", "kept_windows",
           "screen", "stems", "trigrams"]

#: the share of an answer's character trigrams a window must hold to be encoded
MIN_COVER = 0.25
#: the prefilter applies to judges whose threshold is at least this
MIN_THRESHOLD = 0.93
#: answers of this many words or more must also share word stems with a window
LONG_ANSWER_WORDS = 8
#: the share of a long answer's distinct word stems a window must hold to be encoded
MIN_STEM_COVER = 0.4
#: a word's stem is its first this many characters (after the ``contains`` normalisation)
STEM_CHARS = 5


@lru_cache(maxsize=16384)
def trigrams(text: str) -> frozenset[str]:
    """The character trigrams of ``text``'s normalised form (the ``contains`` normalisation), padded by a space
    at each end so that word starts and ends count."""
    padded = f" {normalized(text)} "
    return frozenset(padded[i : i + 3] for i in range(len(padded) - 2))


def cover(answer: frozenset[str], window: str) -> float:
    """The share of ``answer``'s trigrams (from :func:`trigrams`) found in ``window``."""
    if not answer:
        return 1.0
    return len(answer & trigrams(window)) / len(answer)


@lru_cache(maxsize=16384)
def stems(text: str) -> frozenset[str]:
    """The distinct stems of ``text``'s normalised words: their first :data:`STEM_CHARS` characters."""
    return frozenset(word[:STEM_CHARS] for word in normalized(text).split())


def kept_windows(answer: str, text: str, windows: tuple[str, ...], min_cover: float) -> tuple[str, ...]:
    """Those of ``text``'s ``windows`` that hold at least ``min_cover`` of ``answer``'s trigrams (the trigram
    rule alone; :func:`screen` adds the stem rule)."""
    return screen(answer, text, windows, min_cover, 0.0)[0]


def screen(answer: str, text: str, windows: tuple[str, ...], min_cover: float,
           min_stems: float) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The windows the trigram rule keeps (those holding at least ``min_cover`` of ``answer``'s trigrams), and
    those of them the stem rule keeps too: for an answer of :data:`LONG_ANSWER_WORDS` words or more, holding at
    least ``min_stems`` of its word stems (``min_stems=0``: no stem rule). A window's normalised words are a run
    of the text's, so its trigrams and stems are among the text's: when the whole text falls short, every window
    does, and none is looked at (most pairs, at a fraction of the cost)."""
    grams = trigrams(answer)
    if not grams:
        return windows, windows
    need = min_cover * len(grams)
    if len(grams & trigrams(text)) < need:
        return (), ()
    kept = []
    for window in windows:
        window_grams = trigrams(window)
        if not grams.isdisjoint(window_grams) and len(grams & window_grams) >= need:  # most share none: no set built
            kept.append(window)
    by_trigrams = tuple(kept)
    if min_stems <= 0.0 or len(answer.split()) < LONG_ANSWER_WORDS or not by_trigrams:
        return by_trigrams, by_trigrams
    answer_stems = stems(answer)
    need = min_stems * len(answer_stems)
    if len(answer_stems & stems(text)) < need:
        return by_trigrams, ()
    return by_trigrams, tuple(w for w in by_trigrams if len(answer_stems & stems(w)) >= need)
