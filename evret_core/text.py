"""Text utilities shared by every stage: the one normalisation, stop words, sentences, content words, and the cues
of what a question asks for.

The normalisation is shared by Evret's lexical judges (exact, contains, token-overlap) and by the semantic judge's
verbatim check.

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

The extractive generator, the lexical claim judge and lexical answer relevance read texts with the rest:
:func:`split_sentences`, :func:`content_words` (word stems without :data:`STOPWORDS`, by :func:`stem`), and the
question cues :data:`NUMBER_CUES`, :data:`NAME_CUES` and :data:`NUMBER_WORDS`.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

__all__ = ["ARTICLES", "NAME_CUES", "NUMBER_CUES", "NUMBER_WORDS", "STOPWORDS", "WORD", "contains_tokens",
           "content_words", "normalize", "normalize_tokens", "split_sentences", "stem", "strip_punctuation"]

ARTICLES = frozenset({"a", "an", "the"})
# whitespace, the dashes that join two words (figure, en and em dash, horizontal bar, minus) and the slash
_SPLIT = re.compile(r"[\s\u2012\u2013\u2014\u2015\u2212/]+")
# the same split, faster: the joiners become spaces, then str.split() (its whitespace is the pattern's \s;
# checked on every code point in tests/contracts/test_context_columns.py)
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


# A short list of English function words: they carry no topical signal, and counting them would let
# "the", "of" and "is" alone make two unrelated texts overlap.
STOPWORDS = frozenset(
    """a an the and or but if then else of in on at to for from by with without about into over under
    is are was were be been being am do does did doing have has had having it its this that these those
    there here what which who whom whose when where why how i you he she we they me him her us them my your
    his our their as so than too very can could should would may might must will shall not no nor only own
    same such just also any all both each few more most other some""".split()
)

_SENTENCE = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"')\]]))\s+(?=[\"'(\[]?[A-Z0-9])")
WORD = re.compile(r"\w+", re.UNICODE)


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``: split after ``.``, ``!`` or ``?`` followed by space and a capital or digit; lines
    are sentences too. Empty pieces are dropped."""
    out: list[str] = []
    for line in text.split("\n"):
        out.extend(s.strip() for s in _SENTENCE.split(line) if s.strip())
    return out


def stem(word: str) -> str:
    """``word`` lower-cased, without a plural ``s`` (kept after ``ss`` and in words of three letters or fewer)."""
    word = word.lower()
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def content_words(text: str) -> list[str]:
    """Lower-cased word stems of ``text`` without stop words, in order."""
    return [stem(w) for w in WORD.findall(text) if w.lower() not in STOPWORDS]


NUMBER_CUES = ("when", "year", "century", "how many", "how much", "how long", "how old", "date", "percent",
                "how far", "how big", "how large", "what time", "number")
NUMBER_WORDS = frozenset("""one two three four five six seven eight nine ten eleven twelve twenty thirty forty fifty
    hundred hundreds thousand thousands million millions billion first second third half dozen""".split())
NAME_CUES = ("who", "whom", "whose", "which", "where", "what city", "what country", "name")
