"""Built-in judges: the token-overlap algorithm step by step (their conformance runs in
tests/conformance/test_builtins.py)."""

from __future__ import annotations

import pytest

from evret_core import EvretError, ExactJudge, JudgmentContext, RegexJudge, TokenOverlapJudge, create_judge
from evret_core.judge import lexical


def ctx(expected: str, retrieved: str, query: str = "unrelated question") -> JudgmentContext:
    return JudgmentContext(query=query, expected_text=expected, retrieved_text=retrieved)


def test_exact_uses_the_shared_normalisation() -> None:
    judge = ExactJudge()
    assert judge.judge(ctx("Paris  is\nthe Capital", " paris is the capital "))
    assert judge.judge(ctx("Paris is the capital", "Paris is the capital."))  # punctuation at a token boundary
    assert not judge.judge(ctx("Paris is the capital", "Paris is a capital"))
    assert not judge.judge(ctx("...", "!"))  # nothing left after normalising: no match, not a trivial equality
    assert judge.judge(ctx("1832", "In 1832.", )) is False  # exact is equality, not containment


def test_regex_searches_the_expected_pattern() -> None:
    assert RegexJudge().judge(ctx(r"\b(two|2) thousand eggs\b", "she lays two thousand eggs a day"))
    assert not RegexJudge().judge(ctx(r"^eggs", "she lays eggs"))
    assert RegexJudge(ignore_case=True).judge(ctx("QUEEN", "the queen"))
    assert not create_judge("regex", ignore_case="false").judge(ctx("QUEEN", "the queen"))
    with pytest.raises(EvretError, match="not a valid pattern"):
        RegexJudge().judge(ctx("(unclosed", "x"))


# TokenOverlapJudge, one step of the documented algorithm per case (defaults: min_tokens=2, ratio 0.6, no boost)
@pytest.mark.parametrize(
    ("expected", "retrieved", "query", "verdict", "why"),
    [
        ("The Queen", "the   queen", "q", True, "1. equal after normalisation"),
        ("varroa", "The varroa mite is a pest.", "q", True, "1. expected contained in retrieved"),
        ("1832.", "...in 1832, at age 23", "q", True, "1. containment after normalisation"),
        ("the varroa mite is the most serious pest", "varroa mite", "q", True, "1. retrieved contained in expected"),
        ("rag", "a fragment of text", "q", False, "1. containment is whole-word only"),
        # tokens: {queen, lays, eggs, summer, daily}; shared with retrieved: queen, lays, eggs = 3/5 = 0.6
        ("queen lays eggs in summer daily", "a queen lays many eggs", "zzz", True, "2. ratio 0.6 >= 0.6"),
        ("queen lays eggs daily", "the queen lays nothing", "zzz", False, "2. ratio 0.5 < 0.6"),
        # the query's words are no evidence: {died, father} come from the question, only 1651 is evidence
        ("His father died in 1651.", "Her father died young.", "When did his father die? died", False,
         "2. question words are not evidence"),
        ("His father died in 1651.", "In 1651 the old man passed away", "When did his father die? died", True,
         "2. the one evidence token is shared"),
        ("the Duke of Normandy", "a duchy", "Who was the duke of Normandy?", False,
         "2. no evidence token left: only containment can match"),
        ("of the", "something else entirely", "q", False, "2. no content tokens"),
    ],
)
def test_token_overlap_algorithm(expected: str, retrieved: str, query: str, verdict: bool, why: str) -> None:
    judge = TokenOverlapJudge()
    assert judge.judge(ctx(expected, retrieved, query)) is verdict, why
    assert judge.batch_judge([ctx(expected, retrieved, query)]) == [verdict], why


def test_query_boost_is_opt_in() -> None:
    # shared with the retrieved text: queen, lays (2 of 4 = 0.5); the query shares 'nothing' with it
    context = ctx("queen lays eggs daily", "the queen lays nothing", "why nothing")
    assert not TokenOverlapJudge().judge(context)
    assert TokenOverlapJudge(query_boost=True).judge(context)  # the ratio relaxes to 0.45
    assert create_judge("token-overlap", query_boost="true").judge(context)
    # the bias the default removes: answer words that only repeat the question
    biased = ctx("His father died in 1651.", "Her father died young.", "When did his father die?")
    assert TokenOverlapJudge(query_boost=True).judge(biased)
    assert not TokenOverlapJudge().judge(biased)


def test_options_change_the_thresholds() -> None:
    context = ctx("queen lays eggs daily", "the queen lays nothing", "zzz")  # 2 of 4 shared
    assert TokenOverlapJudge(overlap_ratio=0.5).judge(context)
    assert not TokenOverlapJudge(min_tokens=3, overlap_ratio=0.5).judge(context)


@pytest.mark.parametrize("options", [{"min_tokens": 0}, {"overlap_ratio": 1.5}, {"overlap_ratio": "x"},
                                     {"overlap_ratio": float("nan")}])
def test_bad_options(options: dict[str, object]) -> None:
    with pytest.raises(EvretError, match="token-overlap judge"):
        TokenOverlapJudge(**options)  # type: ignore[arg-type]


def test_batch_judge_tokenises_each_distinct_text_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = lexical.tokenize

    def counting(text: str) -> frozenset[str]:
        calls.append(text)
        return real(text)

    monkeypatch.setattr(lexical, "tokenize", counting)
    queries = ["what do queens do", "how long do workers live"]
    expected = ["the queen lays eggs", "workers live six weeks"]
    retrieved = [f"document {i} about queens and workers" for i in range(5)]
    contexts = [ctx(e, r, q) for q in queries for e in expected for r in retrieved]
    judge = TokenOverlapJudge()
    answers = judge.batch_judge(contexts)
    assert len(contexts) == 20
    distinct = set(queries) | set(expected) | set(retrieved)
    assert sorted(calls) == sorted(distinct)  # 9 tokenisations for 20 contexts, each text once
    calls.clear()
    assert answers == [judge.judge(c) for c in contexts]
    assert len(calls) == 3 * len(contexts)  # judge() alone tokenises three texts per context


def test_judge_config_is_in_the_repr() -> None:
    assert repr(TokenOverlapJudge(min_tokens=3)) == "TokenOverlapJudge(min_tokens=3, overlap_ratio=0.6, query_boost=False)"
