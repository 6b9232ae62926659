"""Dependency-free judges: exact, regex and token overlap."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from evret_core.errors import EvretError
from evret_core.judges.base import Judge
from evret_core.models import JudgmentContext

_WS = re.compile(r"\s+")
_TOKEN = re.compile(r"\w+", re.UNICODE)

# A short list of English function words: they carry no topical signal, and counting them would let
# "the", "of" and "is" alone make two unrelated texts overlap.
STOPWORDS = frozenset(
    """a an the and or but if then else of in on at to for from by with without about into over under
    is are was were be been being am do does did doing have has had having it its this that these those
    there here what which who whom whose when where why how i you he she we they me him her us them my your
    his our their as so than too very can could should would may might must will shall not no nor only own
    same such just also any all both each few more most other some""".split()
)


def normalize(text: str) -> str:
    """Lower-case and collapse runs of whitespace to one space, trimmed."""
    return _WS.sub(" ", text).strip().lower()


def tokenize(text: str) -> frozenset[str]:
    """The set of lower-cased word tokens of ``text`` (``\\w+``), stop words removed."""
    return frozenset(t for t in _TOKEN.findall(text.lower()) if t not in STOPWORDS)


def contains_phrase(outer: str, inner: str) -> bool:
    """True when ``inner`` occurs in ``outer`` not glued to a word character on either side."""
    start = outer.find(inner)
    while start != -1:
        end = start + len(inner)
        before_ok = start == 0 or not (outer[start - 1].isalnum() or outer[start - 1] == "_") or not _edge(inner[0])
        after_ok = end == len(outer) or not (outer[end].isalnum() or outer[end] == "_") or not _edge(inner[-1])
        if before_ok and after_ok:
            return True
        start = outer.find(inner, start + 1)
    return False


def _edge(ch: str) -> bool:
    # a phrase that starts or ends with punctuation may touch a word ("(rag)" inside "x(rag)")
    return ch.isalnum() or ch == "_"


class ExactJudge(Judge):
    """Match when the two texts are equal after normalising case and whitespace."""

    name = "exact"

    def judge(self, context: JudgmentContext) -> bool:
        return normalize(context.expected_text) == normalize(context.retrieved_text)

    def batch_judge(self, contexts: Sequence[JudgmentContext]) -> list[bool]:
        norm = lru_cache(maxsize=None)(normalize)
        return [norm(c.expected_text) == norm(c.retrieved_text) for c in contexts]


class RegexJudge(Judge):
    """Match when the expected text, read as a regular expression, is found in the retrieved text."""

    name = "regex"

    def __init__(self, ignore_case: bool = False) -> None:
        self.ignore_case = bool(ignore_case)
        self._compiled: dict[str, re.Pattern[str]] = {}

    def _pattern(self, expected: str) -> re.Pattern[str]:
        pattern = self._compiled.get(expected)
        if pattern is None:
            try:
                pattern = re.compile(expected, re.IGNORECASE if self.ignore_case else 0)
            except re.error as exc:
                raise EvretError(f"regex judge: expected answer {expected!r} is not a valid pattern: {exc}") from None
            self._compiled[expected] = pattern
        return pattern

    def judge(self, context: JudgmentContext) -> bool:
        return self._pattern(context.expected_text).search(context.retrieved_text) is not None

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "ignore_case": self.ignore_case}


class TokenOverlapJudge(Judge):
    """Cheap lexical matching between an expected answer and a retrieved text.

    The algorithm, in order (texts are normalised: lower case, whitespace collapsed):

    1. equal normalised texts match;
    2. one normalised text containing the other as a whole-word phrase matches ("rag" is in "what is rag?"
       but not in "fragment");
    3. otherwise compare token sets (``\\w+`` tokens, lower case, English stop words removed): the texts match
       when they share at least ``min_tokens`` tokens and shared / expected tokens >= ``overlap_ratio``;
    4. with ``query_boost``, when the query shares at least one token with the retrieved text, the ratio
       threshold relaxes to ``0.75 * overlap_ratio`` (``min_tokens`` still applies).
    """

    name = "token-overlap"

    def __init__(self, min_tokens: int = 2, overlap_ratio: float = 0.6, query_boost: bool = True) -> None:
        try:
            min_tokens = int(min_tokens)
            overlap_ratio = float(overlap_ratio)
        except (TypeError, ValueError):
            raise EvretError("token-overlap judge: min_tokens must be an integer and overlap_ratio a number") from None
        if min_tokens < 1:
            raise EvretError(f"token-overlap judge: min_tokens must be >= 1, got {min_tokens}")
        if not 0.0 < overlap_ratio <= 1.0:
            raise EvretError(f"token-overlap judge: overlap_ratio must be in (0, 1], got {overlap_ratio}")
        if isinstance(query_boost, str):
            query_boost = query_boost.strip().lower() in ("1", "true", "yes", "on")
        self.min_tokens = min_tokens
        self.overlap_ratio = overlap_ratio
        self.query_boost = bool(query_boost)

    def config(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "min_tokens": self.min_tokens,
            "overlap_ratio": self.overlap_ratio,
            "query_boost": self.query_boost,
        }

    def _decide(
        self,
        norm_expected: str,
        norm_retrieved: str,
        expected_tokens: frozenset[str],
        retrieved_tokens: frozenset[str],
        query_tokens: frozenset[str],
    ) -> bool:
        if norm_expected == norm_retrieved:
            return True
        if norm_expected and norm_retrieved and (
            contains_phrase(norm_retrieved, norm_expected) or contains_phrase(norm_expected, norm_retrieved)
        ):
            return True
        if not expected_tokens:
            return False
        shared = len(expected_tokens & retrieved_tokens)
        if shared < self.min_tokens:
            return False
        threshold = self.overlap_ratio
        if self.query_boost and not query_tokens.isdisjoint(retrieved_tokens):
            threshold *= 0.75
        return shared / len(expected_tokens) >= threshold

    def judge(self, context: JudgmentContext) -> bool:
        return self._decide(
            normalize(context.expected_text),
            normalize(context.retrieved_text),
            tokenize(context.expected_text),
            tokenize(context.retrieved_text),
            tokenize(context.query) if self.query_boost else frozenset(),
        )

    def batch_judge(self, contexts: Sequence[JudgmentContext]) -> list[bool]:
        """Judge many contexts, normalising and tokenising each distinct text once."""
        norms: dict[str, str] = {}
        tokens: dict[str, frozenset[str]] = {}

        def prepared(text: str) -> tuple[str, frozenset[str]]:
            norm = norms.get(text)
            if norm is None:
                norm = norms[text] = normalize(text)
                tokens[text] = tokenize(text)
            return norm, tokens[text]

        results = []
        for c in contexts:
            ne, te = prepared(c.expected_text)
            nr, tr = prepared(c.retrieved_text)
            tq = prepared(c.query)[1] if self.query_boost else frozenset()
            results.append(self._decide(ne, nr, te, tr, tq))
        return results
