"""Stage 4, assign: judgments -> id sets: how a text-labelled query's judgments become a ranking of ids and its relevant ids
(and, for a judge that needs no expected answer, how its grades become the query's graded ids: :func:`assign_graded`).

Matching modes:

- ``first_match`` (default): each expected answer is one relevant item (``answer:0``, ``answer:1``, ...). The
  retrieved documents are matched to the answers they match by a *rank-priority maximum matching*: documents are
  taken in rank order and each one gets an answer through an augmenting path (it may take an answer from a
  higher-ranked document that can move to another answer it matches). The result finds every answer that any
  one-document-per-answer assignment could find, and among those assignments it prefers higher ranks: the set of
  ranks holding an answer is the best possible, compared rank by rank from the top. A document that matches
  answers but gets none (they are all held) is a repeat: it scores as the first answer it matches, which
  trec_eval counts once, so it is not relevant again. A document matching nothing keeps its own id.
- ``any_match``: every retrieved document that matches any expected answer is relevant, and recall counts the
  expected answers matched by at least one document in the top k (the answer coverage carried in
  :class:`~evret_core.contracts.metric.RankedBatch`). For the rank-based measures the number of relevant items is the
  larger of the number of expected answers and the number of matching documents retrieved, so no score exceeds 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from evret_core.contracts.errors import EvretError

MATCHING_MODES = ("first_match", "any_match")

__all__ = ["MATCHING_MODES", "Assignment", "answer_coverage", "answer_id", "assign_graded", "assign_text",
           "rank_priority_matching"]


def answer_id(index: int) -> str:
    """The id an expected answer scores as in ``first_match`` mode."""
    return f"answer:{index}"


def check_matching(matching: str) -> str:
    """``matching`` when it names a mode, else an EvretError listing the modes."""
    if matching not in MATCHING_MODES:
        raise EvretError(f"unknown matching mode {matching!r}; use one of {', '.join(MATCHING_MODES)}")
    return matching


def rank_priority_matching(matched: Sequence[Sequence[int]], hits: Sequence[int] | None = None) -> list[int]:
    """The answer each document holds (-1: none) in the rank-priority maximum matching.

    ``matched[r]`` lists the answers the document at rank ``r`` matches (answers tried in that order). Documents
    are added in rank order; each is matched through an augmenting path when one exists (Kuhn's algorithm), and
    a matched document stays matched, so the matched ranks are the lexicographically best set of a maximum
    matching (the greedy basis of the transversal matroid). A free answer is taken directly when there is one,
    so a document only moves a higher-ranked one when it has to. ``hits``, when given, are the ranks whose
    ``matched`` is not empty, ascending (the others hold nothing and are skipped).
    """
    holder: dict[int, int] = {}  # answer -> document holding it
    held = [-1] * len(matched)
    if hits is None:
        hits = [r for r, m in enumerate(matched) if m]
    if len(hits) == 1:  # one matching document: it takes its first answer
        held[hits[0]] = matched[hits[0]][0]
        return held
    n_answers = len(set().union(*(matched[r] for r in hits)))

    def augment(start: int) -> None:
        # iterative depth-first search for an augmenting path (no recursion limit on queries with many answers)
        visited: set[int] = set()
        stack = [(start, iter(matched[start]))]
        path: list[int] = []  # path[i]: the answer stack[i]'s document would take
        while stack:
            for answer in stack[-1][1]:
                if answer in visited:
                    continue
                visited.add(answer)
                path.append(answer)
                owner = holder.get(answer)
                if owner is None:
                    for (doc, _), taken in zip(stack, path, strict=True):
                        holder[taken] = doc
                        held[doc] = taken
                    return
                stack.append((owner, iter(matched[owner])))
                break
            else:
                stack.pop()
                if path:
                    path.pop()

    for doc in hits:
        answers = matched[doc]
        free = next((a for a in answers if a not in holder), None)
        if free is not None:
            holder[free] = doc
            held[doc] = free
        elif len(holder) < n_answers:  # an augmenting path ends at a free answer: none left, none to find
            augment(doc)
    return held


def answer_coverage(matched: Sequence[Sequence[int]]) -> list[int]:
    """How many expected answers are found for the first time at each rank (an answer counts once, at its best
    rank): the top-k sum over the number of answers is ``any_match`` recall@k."""
    seen: set[int] = set()
    out: list[int] = []
    for answers in matched:
        before = len(seen)
        seen.update(answers)
        out.append(len(seen) - before)
    return out


@dataclass
class Assignment:
    """A text-labelled query's ranking as scored: ``assigned[r]`` is the id the document at rank ``r`` counts as,
    ``relevance`` the relevant ids (grade 1), ``coverage`` the answers first found per rank (``any_match`` only)."""

    assigned: list[str]
    relevance: dict[str, float]
    coverage: list[int] | None = None


def assign_text(
    doc_ids: Sequence[str],
    matched: Sequence[Sequence[int]],
    n_answers: int,
    matching: str,
    hits: Sequence[int] | None = None,
) -> Assignment:
    """The ids and relevance of one text-labelled query from its judgments (see the module docs). ``hits``, when
    the caller knows them, are the ranks (0-based, ascending) whose ``matched`` is not empty: only those are
    visited, so a query's cost follows its matches rather than its depth."""
    if hits is None:
        hits = [r for r, m in enumerate(matched) if m]
    if matching == "first_match":
        assigned = list(doc_ids)
        if hits:
            held = rank_priority_matching(matched, hits)
            for r in hits:
                assigned[r] = answer_id(held[r] if held[r] >= 0 else matched[r][0])
        return Assignment(assigned, {answer_id(j): 1.0 for j in range(n_answers)})
    check_matching(matching)
    relevance = {doc_ids[r]: 1.0 for r in hits}
    n_matching = len(relevance)
    for j in range(max(n_answers, n_matching) - n_matching):
        relevance[f"unretrieved:{j}"] = 1.0
    coverage = [0] * len(doc_ids)
    seen: set[int] = set()
    for r in hits:  # as answer_coverage(matched), visiting only the ranks that match something
        before = len(seen)
        seen.update(matched[r])
        coverage[r] = len(seen) - before
    return Assignment(list(doc_ids), relevance, coverage)


def assign_graded(doc_ids: Sequence[str], grades: Sequence[float | None]) -> dict[str, float]:
    """A graded judge's grades of one query's retrieved documents (``grades[r]`` for rank ``r``; None: unmeasured)
    as its relevant ids, id -> grade, zeros included (judged non-relevant, as in TREC qrels). A document retrieved
    twice counts once, with its first measured grade; a document whose every grade is unmeasured is left out
    (unjudged), so ``len(set(doc_ids)) - len(result)`` is the query's unmeasured count."""
    if len(doc_ids) != len(grades):
        raise EvretError(f"{len(grades)} grades for {len(doc_ids)} retrieved documents")
    out: dict[str, float] = {}
    for doc_id, grade in zip(doc_ids, grades, strict=True):
        if grade is not None and doc_id not in out:
            out[doc_id] = float(grade)
    return out


def coverage_matrix(coverage: Sequence[Sequence[int] | None], width: int) -> np.ndarray:
    """Per-rank answer coverage of a batch of queries, zero-padded to ``width`` (rows of None are all zero)."""
    out = np.zeros((len(coverage), width), dtype=np.float64)
    for q, row in enumerate(coverage):
        if row:
            cut = row[:width]
            out[q, : len(cut)] = cut
    return out
