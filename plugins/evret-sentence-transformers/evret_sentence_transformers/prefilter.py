"""The semantic judge's lexical prefilter: which windows are worth an encode at a high threshold.

At the default threshold (0.94) a window matches an answer only when it is nearly the answer's own words (plurals,
possessives, punctuation inside words): then it holds most of the answer's character trigrams. A window that
holds fewer than :data:`MIN_COVER` of them is not encoded, and counts as not matching. This is a heuristic, not a
proof: it was checked on real data (``benchmarks/semantic.py --cases``; docs/benchmarks.md, "Semantic judge:
encodes saved"), where the highest cosine among the windows it skipped was 0.913 ("Switzerland" against
"Swiss"), below the 0.93 from which it is used (:data:`MIN_THRESHOLD`). Below that threshold paraphrases share
fewer characters, so every window is encoded. The prefilter can only turn a match into a non-match, never the
reverse, and it never touches ``batch_score``, which stays exact.
"""

from __future__ import annotations

from functools import lru_cache

from evret_core.sdk import normalized

__all__ = ["MIN_COVER", "MIN_THRESHOLD", "cover", "kept_windows", "trigrams"]

#: the share of an answer's character trigrams a window must hold to be encoded
MIN_COVER = 0.25
#: the prefilter applies to judges whose threshold is at least this
MIN_THRESHOLD = 0.93


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


def kept_windows(answer: str, text: str, windows: tuple[str, ...], min_cover: float) -> tuple[str, ...]:
    """Those of ``text``'s ``windows`` that hold at least ``min_cover`` of ``answer``'s trigrams. A window's
    normalised words are a run of the text's, so its trigrams are among the text's: when the whole text falls
    short, every window does, and none is looked at (most pairs, at a fraction of the cost)."""
    grams = trigrams(answer)
    if not grams:
        return windows
    need = min_cover * len(grams)
    if len(grams & trigrams(text)) < need:
        return ()
    kept = []
    for window in windows:
        window_grams = trigrams(window)
        if not grams.isdisjoint(window_grams) and len(grams & window_grams) >= need:  # most share none: no set built
            kept.append(window)
    return tuple(kept)
