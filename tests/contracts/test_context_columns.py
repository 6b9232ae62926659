"""Judgment contexts as columns (issue 19, text-labelled speed): the columnar plan, the judges' columns path and
the rank-only assignment give exactly what the one-context-at-a-time path gives, on random and hostile data."""

from __future__ import annotations

import pickle
import random
import unicodedata
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from evret_core import EvaluationDataset, Evaluator, EvretError, JudgmentContext, QueryExample
from evret_core.assign import answer_coverage, answer_id, assign_text, rank_priority_matching
from evret_core.contracts.judge import ContextColumns, Judge
from evret_core.contracts.retrieve import RankedColumns
from evret_core.judge import ContainsJudge, ExactJudge, RegexJudge, TokenOverlapJudge
from evret_core.judge.judgment_plan import plan_text
from evret_core.results.per_query import QueryTable

# empty, punctuation only, NFKC / case folding, combining marks, articles, numbers, emoji, spaces
HOSTILE = ["", " ", "!!!", "Straße", "STRASSE", "ｆｕｌｌ width", "full WIDTH", "café", "cafe\u0301", "the Rhine",
           "a map of Rhine", "in 1832, at age 23", "1832.", "rag", "fragment", "🙂 ok", "ok", "well-known fact",
           "Paris/London", "paris", "u.s. army", "the", "\u00a0nbsp\u00a0", "x" * 300, "(rag)"]
ANSWERS = ["Straße", "full width", "café", "Rhine", "1832", "rag", "ok", "Paris", "u.s. army", "the", "!!!",
           "nbsp", "[a-z]+ing", "well known"]


def hostile_dataset(seed: int, shared_answers: bool) -> tuple[EvaluationDataset, dict[str, RankedColumns]]:
    """Queries with 1-3 answers (some with aliases), 0-12 retrieved texts drawn from a small hostile pool (so
    texts repeat within and across queries); with ``shared_answers`` two queries ask the same thing."""
    rng = random.Random(seed)
    queries: list[QueryExample] = []
    run: dict[str, RankedColumns] = {}
    for q in range(40):
        answers: list[Any] = []
        for _ in range(rng.randint(1, 3)):
            first = rng.choice(ANSWERS)
            answers.append([first, *rng.sample([a for a in ANSWERS if a != first], rng.randint(1, 2))]
                           if rng.random() < 0.3 else first)
        text = f"question {q % 7 if shared_answers else q}"
        if shared_answers and q % 5 == 0:
            answers = ["Rhine"]
        texts = [rng.choice(HOSTILE) for _ in range(rng.randint(0, 12))]
        queries.append(QueryExample(query_id=f"q{q}", query_text=text, expected_answers=answers))
        run[f"q{q}"] = RankedColumns([f"d{q}_{r}" for r in range(len(texts))], np.arange(len(texts), 0, -1.0),
                                     texts)
    return EvaluationDataset(queries=queries), run


def reference_plan(queries: Sequence[QueryExample], run: dict[str, RankedColumns]
                   ) -> tuple[list[JudgmentContext], dict[str, list[list[int]]]]:
    """The evaluator's plan before columns: a context per distinct (answer, text), numbered as first seen."""
    slot_of: dict[JudgmentContext, int] = {}
    slots: dict[str, list[list[int]]] = {}
    for q in queries:
        here = []
        for text in run[q.query_id].texts or []:
            row = []
            for i in range(len(q.expected_answers)):
                row.append(slot_of.setdefault(q.judgment_context(i, str(text)), len(slot_of)))
            here.append(row)
        slots[q.query_id] = here
    return list(slot_of), slots


def reference_assign(doc_ids: Sequence[str], matched: Sequence[Sequence[int]], n_answers: int,
                     matching: str) -> tuple[list[str], dict[str, float], list[int] | None]:
    """assign_text as it was: every rank visited."""
    if matching == "first_match":
        held = rank_priority_matching(matched) if any(matched) else [-1] * len(doc_ids)
        assigned = [answer_id(h) if h >= 0 else (answer_id(m[0]) if m else d)
                    for d, h, m in zip(doc_ids, held, matched, strict=True)]
        return assigned, {answer_id(j): 1.0 for j in range(n_answers)}, None
    relevance = {d: 1.0 for d, m in zip(doc_ids, matched, strict=True) if m}
    n = len(relevance)
    for j in range(max(n_answers, n) - n):
        relevance[f"unretrieved:{j}"] = 1.0
    return list(doc_ids), relevance, answer_coverage(matched)


class Recording(Judge):
    """Judges context by context through ``inner.judge`` (the path every third-party judge takes), answering
    None for some contexts, and records what it was shown."""

    name = "recording"

    def __init__(self, inner: Judge, unmeasured_every: int = 0) -> None:
        self.inner = inner
        self.unmeasured_every = unmeasured_every
        self.seen: list[JudgmentContext] = []

    def judge(self, context: JudgmentContext) -> bool:
        return self.inner.judge(context)

    def batch_judge(self, contexts: Sequence[JudgmentContext]) -> list[bool | None]:
        out: list[bool | None] = []
        for context in contexts:
            self.seen.append(context)
            miss = self.unmeasured_every and len(self.seen) % self.unmeasured_every == 0
            out.append(None if miss else self.inner.judge(context))
        return out


JUDGES = [ExactJudge(), ContainsJudge(), ContainsJudge(remove_articles=True), TokenOverlapJudge(),
          TokenOverlapJudge(query_boost=True, min_tokens=1), RegexJudge(ignore_case=True)]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("shared", [False, True])
def test_the_columnar_plan_is_the_old_plan(seed: int, shared: bool) -> None:
    dataset, run = hostile_dataset(seed, shared)
    expected, slots = reference_plan(dataset.queries, run)
    plan = plan_text(dataset.queries, lambda i: run[dataset.queries[i].query_id])
    assert list(plan.contexts) == expected  # the same contexts, in the same (first-seen) order
    assert [plan.contexts[i] for i in range(len(expected))] == expected
    for j, i in enumerate(plan.queries):
        assert plan.slots(j).tolist() == slots[dataset.queries[i].query_id]


@pytest.mark.parametrize("judge", JUDGES, ids=lambda j: repr(j))
@pytest.mark.parametrize("seed", range(4))
def test_judges_columns_path_equals_their_one_context_rule(judge: Judge, seed: int) -> None:
    dataset, run = hostile_dataset(seed, seed % 2 == 1)
    contexts = plan_text(dataset.queries, lambda i: run[dataset.queries[i].query_id]).contexts
    one_by_one = [judge.judge(c) for c in contexts]
    assert judge.batch_judge(contexts) == one_by_one  # columns, as the evaluator passes them
    assert judge.batch_judge(list(contexts)) == one_by_one  # a plain list of contexts
    chunks = [v for s in range(0, len(contexts), 7) for v in judge.batch_judge(contexts[s : s + 7])]
    assert chunks == one_by_one  # chunk by chunk, sharing the memo
    assert judge.batch_score(contexts) == judge.batch_score(list(contexts))
    assert any(one_by_one) and not all(one_by_one)


@pytest.mark.parametrize("matching", ["first_match", "any_match"])
@pytest.mark.parametrize("seed", range(4))
def test_evaluator_results_equal_the_one_context_path(matching: str, seed: int) -> None:
    dataset, run = hostile_dataset(seed, seed % 2 == 0)
    metrics = ["ndcg@10", "recall@10", "mrr", "precision@5"]
    recorder = Recording(ContainsJudge(), unmeasured_every=5)
    slow = Evaluator(run, metrics, judge=recorder, matching=matching, n_resamples=10, k=12).evaluate(dataset)
    expected, slots = reference_plan(dataset.queries, run)
    assert recorder.seen == expected  # a judge that indexes the columns sees the contexts of old, in order
    verdicts = [None if (n + 1) % 5 == 0 else ContainsJudge().judge(c) for n, c in enumerate(expected)]
    for q in dataset.queries:
        got = slow.per_query[q.query_id]
        matched = [[a for a, s in enumerate(row) if verdicts[s] is True] for row in slots[q.query_id]]
        missing = [[a for a, s in enumerate(row) if verdicts[s] is None] for row in slots[q.query_id]]
        assigned, relevance, _ = reference_assign(run[q.query_id].ids, matched, len(q.expected_answers), matching)
        assert [j.matched for j in got.judgments] == matched
        assert [j.unmeasured for j in got.judgments] == missing
        assert [j.assigned for j in got.judgments] == assigned
        assert got.relevant_ids == relevance
        assert got.unmeasured == sum(map(len, missing))
    elements = sum(len(r) for rows in slots.values() for r in rows)
    assert slow.stats["judgments"] == {"contexts": elements, "unique": len(expected),
                                       "unmeasured": verdicts.count(None)}
    assert slow.stats["unmeasured"]["judgments"] == sum(
        len(x) for q in dataset.queries for row in slots[q.query_id] for x in [[s for s in row if verdicts[s] is None]])
    # the built-in judge on its columns path scores as the one-context path does
    fast = Evaluator(run, metrics, judge=ContainsJudge(), matching=matching, n_resamples=10, k=12).evaluate(dataset)
    by_context = Evaluator(run, metrics, judge=Recording(ContainsJudge()), matching=matching, k=12,
                           n_resamples=10).evaluate(dataset)
    assert fast.scores == by_context.scores
    assert isinstance(fast.per_query, QueryTable) and isinstance(by_context.per_query, QueryTable)
    assert list(fast.per_query.records()) == list(by_context.per_query.records())


@pytest.mark.parametrize("seed", range(20))
def test_assign_text_with_hits_equals_visiting_every_rank(seed: int) -> None:
    rng = random.Random(seed)
    n_answers = rng.randint(1, 4)
    n_docs = rng.randint(0, 15)
    matched = [sorted(rng.sample(range(n_answers), rng.randint(0, n_answers))) if rng.random() < 0.4 else []
               for _ in range(n_docs)]
    ids = [f"d{rng.randint(0, 5)}" for _ in range(n_docs)]  # repeated ids too
    hits = [r for r, m in enumerate(matched) if m]
    for matching in ("first_match", "any_match"):
        want = reference_assign(ids, matched, n_answers, matching)
        for given in (hits, None):
            got = assign_text(ids, matched, n_answers, matching, given)
            assert (got.assigned, got.relevance, got.coverage) == want


def test_context_columns_sequence_slices_memo_and_pickle() -> None:
    answers = [("q1", "Paris", ()), ("q2", "Rhine", ("the Rhine river",))]
    texts = ["Paris is big", "on the Rhine", "Paris is big"]  # a text may occur twice (two queries)
    columns = ContextColumns(answers, texts, [0, 1, 1, 0, 0], [0, 1, 0, 2, 0])
    assert len(columns) == 5
    assert columns[1] == JudgmentContext(query="q2", expected_text="Rhine", retrieved_text="on the Rhine",
                                         aliases=("the Rhine river",))
    assert columns[-1] == columns[0]
    assert list(columns[1:3]) == list(columns)[1:3]
    assert ContextColumns.of(columns) is columns
    rebuilt = ContextColumns.of(list(columns))
    assert list(rebuilt) == list(columns) and len(rebuilt.texts) == 2 and len(rebuilt.answers) == 2
    calls: list[str] = []

    def compute(text: str) -> str:
        calls.append(text)
        return text.upper()

    assert columns[:2].per_text("upper", compute) == {0: "PARIS IS BIG", 1: "ON THE RHINE"}
    assert columns[2:].per_text("upper", compute)[2] == "PARIS IS BIG"
    assert calls == ["Paris is big", "on the Rhine"]  # once per distinct value, across slices
    shipped = pickle.loads(pickle.dumps(columns[1:2]))
    assert list(shipped) == list(columns[1:2])
    assert shipped.texts == ["on the Rhine"] and shipped.answers == [answers[1]]  # only what the slice uses
    with pytest.raises(ValueError, match="same length"):
        ContextColumns(answers, texts, [0], [0, 1])


def test_a_subclass_that_overrides_judge_is_judged_by_it() -> None:
    class Never(ExactJudge):
        def judge(self, context: JudgmentContext) -> bool:
            return False

    class Upper(ContainsJudge):  # overriding batch_judge and calling super keeps the columns path
        def batch_judge(self, contexts: Sequence[JudgmentContext]) -> list[bool | None]:
            return super().batch_judge(contexts)

    contexts = ContextColumns([("q", "Paris", ())], ["Paris"], [0], [0])
    assert ExactJudge().batch_judge(contexts) == [True]
    assert Never().batch_judge(contexts) == [False]
    assert Upper().batch_judge(contexts) == [True]


def test_texts_that_are_not_str_are_judged_by_their_str_form() -> None:
    dataset = EvaluationDataset(queries=[QueryExample(query_id="a", query_text="when", expected_answers=["1832"]),
                                         QueryExample(query_id="b", query_text="who", expected_answers=["7"])])
    run = {"a": RankedColumns(["x", "y", "z"], [3.0, 2.0, 1.0], [1832, "1832", "in 1832"]),  # type: ignore[list-item]
           "b": RankedColumns(["x"], [1.0], [np.str_("7")])}
    res = Evaluator(run, ["recall@3"], judge="exact", n_resamples=2).evaluate(dataset)
    assert isinstance(res.per_query, QueryTable)
    assert [list(j["matched"]) for j in res.per_query.record(0)["judgments"]] == [[0], [0], []]
    assert res.stats["judgments"]["unique"] == 3  # 1832 and "1832" are one context
    assert res.scores["recall@3"] == 1.0


def test_the_fast_split_is_the_pattern_split_on_every_code_point() -> None:
    from evret_core.text import _SPLIT, normalize_tokens, strip_punctuation

    # the basic plane and every whitespace character beyond it, each between tokens
    chars = [*map(chr, range(0x10000)), *filter(str.isspace, map(chr, range(0x10000, 0x110000)))]
    text = "".join(f"a{c}b{c}{c}" for c in chars)
    assert text.translate(normalize_joiners()).split() == [t for t in _SPLIT.split(text) if t]
    assert normalize_tokens("a/b c—d") == ("a", "b", "c", "d")  # the ASCII path and the other
    alnum = filter(str.isalnum, map(chr, range(0x110000)))  # the shortcut of strip_punctuation is exact:
    assert not [c for c in alnum if unicodedata.category(c)[0] == "P"]  # letters and digits are never punctuation
    assert strip_punctuation("«ok»") == "ok" and strip_punctuation("...") == ""
    assert normalize_tokens("1832–1905, Paris/London;  (rag)\u00a0well-known") == (
        "1832", "1905", "paris", "london", "rag", "well-known")


def normalize_joiners() -> dict[int, str]:
    from evret_core.text import _JOINERS

    return _JOINERS


@pytest.mark.parametrize("shared", [False, True])
def test_a_missing_text_is_an_error_naming_the_query_document_and_rank(shared: bool) -> None:
    queries = [QueryExample(query_id="a", query_text="q", expected_answers=["x"]),
               QueryExample(query_id="b", query_text="q" if shared else "r", expected_answers=["x"])]
    run = {"a": RankedColumns(["d1"], [1.0], ["x"]), "b": RankedColumns(["d1", "d2", "d3"], [3.0, 2.0, 1.0],
                                                                        ["x", "y", None])}
    with pytest.raises(EvretError, match=r"query 'b': retrieved document 'd3' \(rank 3\) has no text"):
        Evaluator(run, ["recall@3"]).evaluate(EvaluationDataset(queries=queries))


def test_the_shared_memos_stay_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    import evret_core.contracts.judge as contexts_module

    monkeypatch.setattr(contexts_module, "MEMO_LIMIT", 4)
    texts = [f"text {i}" for i in range(10)]
    columns = ContextColumns([("q", "text 3", ())], texts, [0] * 10, list(range(10)))
    calls: list[str] = []

    def upper(text: str) -> str:
        calls.append(text)
        return text.upper()

    values = columns.per_text("upper", upper)
    assert values == {i: t.upper() for i, t in enumerate(texts)} and calls == texts
    assert len(columns._memo[("per_text", "upper")]) <= 4
    cache = columns.memo("mine")
    for i in range(9):
        cache[i] = i
    assert len(cache) <= 4 and columns[2:].memo("mine") is cache
    assert ExactJudge().batch_judge(columns) == [t == "text 3" for t in texts]


@pytest.mark.parametrize("judge", [None, "exact", "contains", "regex", "token-overlap"])
def test_the_built_in_judges_build_no_context_object(judge: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    dataset, run = hostile_dataset(3, False)
    want = Evaluator(run, ["recall@10"], judge=judge, k=12, n_resamples=2).evaluate(dataset).scores

    def refuse(self: ContextColumns, a: int, t: int) -> JudgmentContext:
        raise AssertionError("a JudgmentContext was built")

    monkeypatch.setattr(ContextColumns, "_context", refuse)
    # the default judge (contains) included: the evaluator and the judge work on the columns alone
    assert Evaluator(run, ["recall@10"], judge=judge, k=12, n_resamples=2).evaluate(dataset).scores == want
    with pytest.raises(AssertionError, match="was built"):
        Evaluator(run, ["recall@10"], judge=Recording(ExactJudge()), k=12).evaluate(dataset)
