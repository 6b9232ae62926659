"""The one text normalisation shared by Evret's lexical judges (exact, contains, token-overlap) and by the
semantic judge's verbatim check.

:func:`normalize_tokens` turns a text into a tuple of tokens, in order:

1. Unicode NFKC (full-width letters, ligatures and non-breaking spaces become their plain forms);
2. case folding (``str.casefold``: "Straße" and "STRASSE" agree);
3. split on whitespace, and on the dashes and slash that join two words ("1832–1905", "Paris/London"; the plain
   hyphen stays inside a word: "well-known");
4. punctuation (Unicode categories P*) removed at both ends of each token: "1832." -> "1832", "(rag)" -> "rag",
   "...in" -> "in"; punctuation inside a token stays ("u.s", "1,000", "don't"); a token of punctuation only is
   dropped;
5. optionally (``remove_articles=True``) the articles "a", "an" and "the" are dropped as whole tokens, as the
   official SQuAD evaluation does.

:func:`normalize` joins those tokens with one space (so whitespace is collapsed), and :func:`contains_tokens` is
the whole-word containment test: "1832." is in "...in 1832, at age 23" but "rag" is not in "fragment".
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

__all__ = ["ARTICLES", "normalize", "normalize_tokens", "contains_tokens", "strip_punctuation"]

ARTICLES = frozenset({"a", "an", "the"})
# whitespace, the dashes that join two words (figure, en and em dash, horizontal bar, minus) and the slash
_SPLIT = re.compile(r"[\s\u2012\u2013\u2014\u2015\u2212/]+")
# the same split, faster: the joiners become spaces, then str.split() (its whitespace is the pattern's \s;
# checked on every code point in tests/test_context_columns.py)
_JOINERS = {ord(c): " " for c in "\u2012\u2013\u2014\u2015\u2212/"}


def _is_punctuation(ch: str) -> bool:
    return unicodedata.category(ch)[0] == "P"


def strip_punctuation(token: str) -> str:
    """``token`` without the punctuation characters at its two ends."""
    if token[:1].isalnum() and token[-1:].isalnum():  # letters and digits are never punctuation: the common case
        return token
    start, end = 0, len(token)
    while start < end and _is_punctuation(token[start]):
        start += 1
    while end > start and _is_punctuation(token[end - 1]):
        end -= 1
    return token[start:end]


def normalize_tokens(text: str, remove_articles: bool = False) -> tuple[str, ...]:
    """The normalised tokens of ``text`` (see the module docs), in order."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    spaced = folded.replace("/", " ") if folded.isascii() else folded.translate(_JOINERS)
    tokens = (strip_punctuation(t) for t in spaced.split())
    if remove_articles:
        return tuple(t for t in tokens if t and t not in ARTICLES)
    return tuple(t for t in tokens if t)


def normalize(text: str, remove_articles: bool = False) -> str:
    """The normalised tokens of ``text`` joined by one space: the form the lexical judges compare."""
    return " ".join(normalize_tokens(text, remove_articles))


@lru_cache(maxsize=65536)
def _cached(text: str, remove_articles: bool) -> str:
    return normalize(text, remove_articles)


def contains_tokens(haystack: str, needle: str) -> bool:
    """True when both are already normalised, ``needle`` is not empty, and its tokens occur in ``haystack`` as a
    contiguous whole-token sequence."""
    # normalised tokens hold no spaces, so padding both sides makes substring search a whole-token test
    return bool(needle) and f" {needle} " in f" {haystack} "


def normalized(text: str, remove_articles: bool = False) -> str:
    """:func:`normalize` with a bounded memo: the judges see the same expected answers and passages many times."""
    return _cached(text, bool(remove_articles))
