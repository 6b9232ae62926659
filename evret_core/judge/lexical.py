"""Dependency-free judges: exact, contains, regex and token overlap.

The lexical judges compare texts in the one normalisation of :mod:`evret_core.text` (NFKC, case
folding, punctuation removed at token boundaries, whitespace collapsed), and match when the expected text or any
of its aliases (``context.expected_variants``) matches.

Their ``batch_judge`` works on columns (:class:`~evret_core.contracts.judge.ContextColumns`, what the evaluator passes;
any other sequence of contexts is put in columns first): each distinct retrieved text and each distinct answer is
normalised once, however many contexts share it, and no context object is built. ``judge(context)`` is the
one-context rule the columns path must agree with. A subclass that overrides ``judge`` is judged by its own
``judge``, context by context (the columns path would bypass it).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from evret_core.contracts.errors import EvretError
from evret_core.contracts.judge import AnswerKey, ContextColumns, Judge, JudgmentContext
from evret_core.limits import check_bool
from evret_core.text import STOPWORDS, contains_tokens, normalize, normalize_tokens, normalized

__all__ = ["ContainsJudge", "ExactJudge", "RegexJudge", "TokenOverlapJudge", "tokenize"]

def tokenize(text: str) -> frozenset[str]:
    """The set of normalised tokens of ``text`` (see :mod:`~evret_core.text`), stop words removed."""
    return frozenset(t for t in normalize_tokens(text) if t not in STOPWORDS)


class ExactJudge(Judge):
    """Match when the retrieved text equals the expected text (or an alias) after normalisation; a text that
    normalises to nothing (empty, or punctuation only) matches nothing."""

    name = "exact"

    def judge(self, context: JudgmentContext) -> bool:
        retrieved = normalized(context.retrieved_text)
        return bool(retrieved) and any(normalized(v) == retrieved for v in context.expected_variants)

    def batch_judge(self, contexts: Sequence[JudgmentContext]) -> list[bool | None]:
        """Judge many contexts, normalising each distinct text and answer once (see the module docs)."""
        if type(self).judge is not ExactJudge.judge:
            return super().batch_judge(contexts)
        columns = ContextColumns.of(contexts)
        texts = columns.per_text(("normalize", False), normalize)
        answers = columns.per_answer(("normalize-set", False), _normalized_set)
        return [bool(texts[t]) and texts[t] in answers[a] for a, t in columns.pairs()]


class ContainsJudge(Judge):
    """Match when the normalised tokens of the expected text (or of an alias) occur in the retrieved text as a
    contiguous whole-word sequence: the has-answer rule of dense-retrieval work on Natural Questions and SQuAD.

    "1832." is in "...in 1832, at age 23"; "rag" is not in "fragment". With ``remove_articles`` the articles a,
    an and the are dropped from both texts first (SQuAD's rule), so "the Rhine" is in "a map of Rhine". An
    expected text that normalises to nothing (only punctuation) matches nothing.
    """

    name = "contains"

    def __init__(self, remove_articles: bool = False) -> None:
        self.remove_articles = check_bool(remove_articles, "contains judge: option 'remove_articles'")

    def judge(self, context: JudgmentContext) -> bool:
        retrieved = normalized(context.retrieved_text, self.remove_articles)
        return any(contains_tokens(retrieved, normalized(v, self.remove_articles))
                   for v in context.expected_variants)

    def batch_judge(self, contexts: Sequence[JudgmentContext]) -> list[bool | None]:
        """Judge many contexts, normalising each distinct text and answer once (see the module docs)."""
        if type(self).judge is not ContainsJudge.judge:
            return super().batch_judge(contexts)
        articles = self.remove_articles
        columns = ContextColumns.of(contexts)
        # normalised tokens hold no spaces: padding both sides makes substring search a whole-token test
        texts = columns.per_text(("padded", articles), lambda text: f" {normalize(text, articles)} ")
        needles = columns.per_answer(("padded-needles", articles), lambda answer: tuple(
            f" {needle} " for needle in dict.fromkeys(normalize(v, articles) for v in _variants(answer)) if needle))
        out: list[bool | None] = []
        for a, t in columns.pairs():
            haystack = texts[t]
            out.append(any(needle in haystack for needle in needles[a]))
        return out

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "remove_articles": self.remove_articles}


class RegexJudge(Judge):
    """Match when the expected text (or an alias), read as a regular expression, is found in the retrieved text."""

    name = "regex"

    def __init__(self, ignore_case: bool = False) -> None:
        self.ignore_case = check_bool(ignore_case, "regex judge: option 'ignore_case'")
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
        return any(self._pattern(v).search(context.retrieved_text) is not None for v in context.expected_variants)

    def batch_judge(self, contexts: Sequence[JudgmentContext]) -> list[bool | None]:
        """Judge many contexts without building them (patterns are compiled once, on first use, as in
        :meth:`judge`)."""
        if type(self).judge is not RegexJudge.judge:
            return super().batch_judge(contexts)
        columns = ContextColumns.of(contexts)
        texts = columns.texts
        variants = columns.per_answer("variants", _variants)
        pattern = self._pattern
        return [any(pattern(v).search(texts[t]) is not None for v in variants[a]) for a, t in columns.pairs()]

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "ignore_case": self.ignore_case}


class TokenOverlapJudge(Judge):
    """Lexical matching that tolerates reordering and partial answers, without crediting the question's words.

    For each variant of the expected answer (the text and its aliases), in order; any variant matching matches:

    1. the variant's normalised tokens occur in the retrieved text as a whole-word sequence (the ``contains``
       rule), or the retrieved text's occur in the variant (a passage that is part of a long answer);
    2. otherwise compare token sets (normalised tokens, English stop words removed). The *evidence* is the
       variant's tokens that are not in the query: a passage sharing the question's words ("When did his father
       die?" / "His father died in 1651.") is what a lexical retriever finds anyway, and is no sign that it holds
       the answer. The texts match when they share at least ``min_tokens`` evidence tokens (or all of them, when
       the evidence has fewer) and shared / evidence tokens >= ``overlap_ratio``. No evidence token: no match.

    ``query_boost=True`` restores the old query-aware rule (opt-in, not recommended): query words count as
    evidence, and when the query shares a token with the retrieved text the ratio relaxes to
    ``0.75 * overlap_ratio``. It favours passages that repeat the question, i.e. lexical retrievers; its measured
    over-credit is in docs/benchmarks.md ("Judges on human labels").
    """

    name = "token-overlap"

    def __init__(self, min_tokens: int = 2, overlap_ratio: float = 0.6, query_boost: bool = False) -> None:
        try:
            min_tokens = int(min_tokens)
            overlap_ratio = float(overlap_ratio)
        except (TypeError, ValueError):
            raise EvretError("token-overlap judge: min_tokens must be an integer and overlap_ratio a number") from None
        if min_tokens < 1:
            raise EvretError(f"token-overlap judge: min_tokens must be >= 1, got {min_tokens}")
        if not 0.0 < overlap_ratio <= 1.0:  # also rejects NaN
            raise EvretError(f"token-overlap judge: overlap_ratio must be in (0, 1], got {overlap_ratio}")
        self.min_tokens = min_tokens
        self.overlap_ratio = overlap_ratio
        self.query_boost = check_bool(query_boost, "token-overlap judge: option 'query_boost'")

    def config(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "min_tokens": self.min_tokens,
            "overlap_ratio": self.overlap_ratio,
            "query_boost": self.query_boost,
        }

    @property
    def threshold(self) -> float:  # type: ignore[override]
        """The score a match needs: :meth:`batch_score` is scaled so that ``judge(c) == score >= threshold``."""
        return self.overlap_ratio

    def _score(
        self,
        norm_expected: str,
        norm_retrieved: str,
        expected_tokens: frozenset[str],
        retrieved_tokens: frozenset[str],
        query_tokens: frozenset[str],
    ) -> float:
        """1.0 for whole-phrase containment; else the evidence ratio (relaxed by the query boost), held just below
        the threshold when fewer than ``min_tokens`` evidence tokens are shared."""
        if contains_tokens(norm_retrieved, norm_expected) or contains_tokens(norm_expected, norm_retrieved):
            return 1.0
        if self.query_boost:
            evidence = expected_tokens
            relax = 0.75 if not query_tokens.isdisjoint(retrieved_tokens) else 1.0
            needed = self.min_tokens
        else:
            evidence = expected_tokens - query_tokens
            relax = 1.0
            needed = min(self.min_tokens, len(evidence))
        if not evidence:
            return 0.0
        shared = len(evidence & retrieved_tokens)
        score = min(1.0, shared / len(evidence) / relax)
        if shared < needed:
            score = min(score, math.nextafter(self.overlap_ratio, 0.0))
        return score

    def _decide(self, *args: Any) -> bool:
        return self._score(*args) >= self.overlap_ratio

    def batch_score(self, contexts: Sequence[JudgmentContext]) -> list[float | None]:
        """The best score over the answer's variants, per context (see :meth:`_score`)."""
        return [float(s) for s in self._scores(contexts)]

    def _scores(self, contexts: Sequence[JudgmentContext]) -> list[float]:
        columns = ContextColumns.of(contexts)
        prepared = columns.memo("normalize+tokenize")  # every distinct string (text, query, answer) once

        def get(text: str) -> tuple[str, frozenset[str]]:
            entry = prepared.get(text)
            if entry is None:
                entry = prepared[text] = (normalize(text), tokenize(text))
            return entry

        texts = columns.per_text("normalize+tokenize", get)
        answers = columns.per_answer("normalize+tokenize", lambda answer: (
            get(answer[0])[1], [get(v) for v in _variants(answer)]))
        out: list[float] = []
        for a, t in columns.pairs():
            nr, tr = texts[t]
            tq, variants = answers[a]
            best = 0.0
            for ne, te in variants:
                best = max(best, self._score(ne, nr, te, tr, tq))
                if best >= 1.0:
                    break
            out.append(best)
        return out

    def judge(self, context: JudgmentContext) -> bool:
        return self.batch_judge([context])[0] is True

    def batch_judge(self, contexts: Sequence[JudgmentContext]) -> list[bool | None]:
        """Judge many contexts, normalising and tokenising each distinct text once."""
        return [score >= self.overlap_ratio for score in self._scores(contexts)]


def _variants(answer: AnswerKey) -> tuple[str, ...]:
    """Every acceptable string of an answer of :class:`ContextColumns`: ``(expected_text, *aliases)``."""
    return (answer[1], *answer[2])


def _normalized_set(answer: AnswerKey) -> frozenset[str]:
    return frozenset(normalize(v) for v in _variants(answer))
