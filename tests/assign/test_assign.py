"""Judgments -> id sets: the rank-priority maximum matching, checked by hand and against brute force."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from evret_core import EvaluationDataset, Evaluator, QueryExample, RankedBatch, RegexJudge, RetrievalResult
from evret_core.assign import answer_coverage, assign_text, rank_priority_matching
from evret_core.metrics.ir import Recall


def test_greedy_would_lose_an_answer() -> None:
    # doc 1 matches answers {0, 1}, doc 2 matches {0}: greedy gives doc 1 answer 0 and leaves answer 1 unfound
    assert rank_priority_matching([[0, 1], [0]]) == [1, 0]
    got = assign_text(["d1", "d2"], [[0, 1], [0]], 2, "first_match")
    assert got.assigned == ["answer:1", "answer:0"]


def test_both_answers_found_through_the_evaluator() -> None:
    dataset = EvaluationDataset(queries=[QueryExample(query_id="q", query_text="q", expected_answers=["a", "b"])])
    docs = [RetrievalResult(doc_id="d1", metadata={"text": "a b"}), RetrievalResult(doc_id="d2", metadata={"text": "a"})]
    res = Evaluator(lambda query, k: docs[:k], ["recall@2", "precision@2", "mrr@2"], judge=RegexJudge()).evaluate(
        dataset)
    assert res.scores == {"recall@2": 1.0, "precision@2": 1.0, "mrr@2": 1.0}
    assert [j.assigned for j in res.per_query["q"].judgments] == ["answer:1", "answer:0"]


def test_higher_ranks_are_preferred_and_repeats_follow_their_holder() -> None:
    # ranks 0 and 1 can both be matched only by moving rank 0 off answer 0; rank 2 is then a repeat
    held = rank_priority_matching([[0, 1], [0], [0, 1], []])
    assert held == [1, 0, -1, -1]
    got = assign_text(["a", "b", "c", "d"], [[0, 1], [0], [0, 1], []], 2, "first_match")
    assert got.assigned == ["answer:1", "answer:0", "answer:0", "d"]
    assert got.relevance == {"answer:0": 1.0, "answer:1": 1.0}


def test_a_long_augmenting_path() -> None:
    # the last document takes answer 0 by pushing every earlier one one answer to the right
    n = 2000  # a path deeper than Python's recursion limit: the search is iterative
    held = rank_priority_matching([[i, i + 1] for i in range(n - 1)] + [[0]])
    assert held == [i + 1 for i in range(n - 1)] + [0]


def _brute_force(matched: list[list[int]], n_answers: int) -> tuple[int, tuple[int, ...]]:
    """The largest number of answers any assignment finds, and the best (rank-wise) set of ranks holding one."""
    best: tuple[int, tuple[int, ...]] = (0, ())
    options = [[-1, *row] for row in matched]
    for choice in itertools.product(*options):
        taken = [c for c in choice if c >= 0]
        if len(taken) != len(set(taken)):
            continue
        ranks = tuple(r for r, c in enumerate(choice) if c >= 0)
        # more answers first; then the rank set that is best from the top (smaller ranks, compared in order)
        key = (len(ranks), tuple(-r for r in ranks))
        if key > (best[0], tuple(-r for r in best[1])):
            best = (len(ranks), ranks)
    return best


@pytest.mark.parametrize("seed", range(300))
def test_matches_brute_force_on_random_graphs(seed: int) -> None:
    rng = random.Random(seed)
    n_docs, n_answers = rng.randint(1, 6), rng.randint(1, 4)
    matched = [sorted(rng.sample(range(n_answers), rng.randint(0, n_answers))) for _ in range(n_docs)]
    rng.shuffle(matched)
    for row in matched:
        rng.shuffle(row)
    held = rank_priority_matching(matched)
    taken = [h for h in held if h >= 0]
    assert len(taken) == len(set(taken))
    assert all(h in matched[r] for r, h in enumerate(held) if h >= 0)
    size, ranks = _brute_force(matched, n_answers)
    assert len(taken) == size
    assert tuple(r for r, h in enumerate(held) if h >= 0) == ranks
    # every document that matches something but holds nothing repeats an answer a higher rank holds
    holder = {h: r for r, h in enumerate(held) if h >= 0}
    assert all(holder[row[0]] < r for r, (row, h) in enumerate(zip(matched, held, strict=True)) if row and h < 0)


def test_answer_coverage_counts_each_answer_once_at_its_best_rank() -> None:
    assert answer_coverage([[0], [0, 1], [], [1, 2]]) == [1, 1, 0, 1]


def test_recall_reads_the_answer_coverage() -> None:
    # two queries: one scored on ids, one on answer coverage (2 of 3 answers in the top 2)
    batch = RankedBatch.from_rankings([["x", "y"], ["d1", "d2"]], [{"x": 1.0}, {"d1": 1.0, "d2": 1.0, "u": 1.0}])
    assert Recall(2).compute(batch).tolist() == pytest.approx([1.0, 2 / 3])
    batch.set_answer_coverage(np.array([[0.0, 0.0], [2.0, 0.0]]), np.array([0.0, 3.0]))
    assert Recall(1).compute(batch).tolist() == pytest.approx([1.0, 2 / 3])
    assert Recall(1).compute(batch[np.array([1])]).tolist() == pytest.approx([2 / 3])  # slices keep it


class TopRecall(Recall):
    """A plugin's recall variant: it reads the same counts and so gets the same any_match numbers."""

    family = "top_recall"


def test_a_recall_variant_gets_the_any_match_numbers() -> None:
    dataset = EvaluationDataset(queries=[QueryExample(query_id="q", query_text="q", expected_answers=["a", "b"])])
    docs = [RetrievalResult(doc_id="d1", metadata={"text": "a b"}), RetrievalResult(doc_id="d2", metadata={"text": "c"})]
    res = Evaluator(lambda query, k: docs[:k], ["recall@1", TopRecall(1)], judge=RegexJudge(),
                    matching="any_match").evaluate(dataset)
    assert res.scores == {"recall@1": 1.0, "top_recall@1": 1.0}
