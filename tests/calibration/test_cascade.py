"""The cascade judge: bands settle, later stages see only the doubtful rest, budgets leave unmeasured."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from evret_core import EvaluationDataset, Evaluator, QueryExample, RetrievalResult, create_judge
from evret_core.contracts.errors import EvretError
from evret_core.contracts.judge import Judge, JudgmentContext
from evret_core.judge.cascade import CascadeJudge, Stage
from evret_core.judge.lexical import TokenOverlapJudge
from evret_core.testing.llm_stubs import StubLLMServer, always, isolate_llm_env, stub_judge


class CountingExact(Judge):
    """An 'expensive' judge for the tests: exact match, counting the contexts it is asked about."""

    name = "counting-exact"

    def __init__(self) -> None:
        self.seen: list[JudgmentContext] = []

    def judge(self, context: JudgmentContext) -> bool:
        return self.batch_judge([context])[0]

    def batch_judge(self, contexts: Sequence[JudgmentContext]) -> list[bool]:
        self.seen.extend(contexts)
        return [c.expected_text.lower() == c.retrieved_text.lower() for c in contexts]


def ctx(expected: str, retrieved: str) -> JudgmentContext:
    return JudgmentContext(query="q", expected_text=expected, retrieved_text=retrieved)


CONTEXTS = [
    ctx("alpha beta gamma", "alpha beta gamma"),  # overlap 1.0 -> settled yes by token-overlap
    ctx("alpha beta gamma", "nothing in common"),  # overlap 0.0 -> settled no
    ctx("alpha beta gamma", "Alpha and beta"),  # overlap 0.67 -> in the band -> expensive judge: no
    ctx("Alpha Beta", "alpha beta gamma delta epsilon"),  # contained -> 1.0 -> yes
    ctx("one two three four", "ONE TWO THREE FOUR extra"),  # contained -> 1.0 -> yes
    ctx("x y z w", "x then y"),  # 0.5 -> band -> expensive: no
]


def test_first_confident_stage_settles_and_the_last_sees_only_the_band() -> None:
    expensive = CountingExact()
    cascade = CascadeJudge([{"name": "token-overlap", "band": [0.3, 0.9], "query_boost": False}, expensive])
    verdicts = cascade.batch_judge(CONTEXTS)
    assert verdicts == [True, False, False, True, True, False]
    assert expensive.seen == [CONTEXTS[2], CONTEXTS[5]]
    assert cascade.settled_by(CONTEXTS[0]) == "token-overlap"
    assert cascade.settled_by(CONTEXTS[2]) == "counting-exact"
    stats = cascade.stats()
    assert stats["settled_by"] == {"token-overlap": 4, "counting-exact": 2}
    assert stats["last_judge_calls"] == 2 and stats["last_judge_calls_saved"] == 4
    assert stats["last_judge_fraction"] == pytest.approx(2 / 6)
    assert cascade.config()["stages"][0]["band"] == [0.3, 0.9]


def test_budget_leaves_the_rest_unmeasured_never_guessed() -> None:
    expensive = CountingExact()
    cascade = CascadeJudge([
        Stage(TokenOverlapJudge(query_boost=False), band=(0.3, 0.9)),
        {"name": "exact", "band": [0.0, 1.0]},  # an exact match settles yes; everything else goes on
        expensive,
    ])
    cascade.stages[-1].max_judgments = 1
    verdicts = cascade.batch_judge(CONTEXTS)
    assert verdicts == [True, False, False, True, True, None]
    assert len(expensive.seen) == 1
    stats = cascade.stats()
    assert stats["unmeasured"] == 1 and stats["stages"][-1]["over_budget"] == 1
    with pytest.raises(EvretError, match="unsettled"):
        cascade.judge(CONTEXTS[5])  # the budget is spent for this run
    cascade.reset_stats()
    assert cascade.judge(CONTEXTS[5]) is False


def test_cascade_in_an_evaluation_reports_its_stats() -> None:
    dataset = EvaluationDataset(queries=[
        QueryExample(query_id="a", query_text="first", expected_answers=["alpha beta gamma"]),
        QueryExample(query_id="b", query_text="second", expected_answers=["x y z w"]),
    ])
    docs = [RetrievalResult(doc_id=str(i), metadata={"text": c.retrieved_text}) for i, c in enumerate(CONTEXTS)]
    expensive = CountingExact()
    cascade = create_judge("cascade", stages=[{"name": "token-overlap", "band": [0.3, 0.9]}, expensive])
    results = Evaluator(lambda q, k: docs[:k], metrics=["hit_rate@6"], judge=cascade, k=6).evaluate(dataset)
    assert results.scores["hit_rate@6"] == 0.5
    judge_stats = results.stats["judge"]
    assert judge_stats["judgments"] == 12
    assert judge_stats["last_judge_calls"] == len(expensive.seen) < 12


@pytest.mark.parametrize(("stages", "message"), [
    (["token-overlap"], "at least two"),
    ("token-overlap", "at least two"),
    (["token-overlap", "exact"], "needs a 'band'"),
    ([{"name": "token-overlap", "band": [0.9, 0.1]}, "exact"], "0 <= low <= high <= 1"),
    ([{"name": "token-overlap", "band": [0.1, float("nan")]}, "exact"], "0 <= low <= high <= 1"),
    ([{"name": "token-overlap", "band": "wide"}, "exact"], r"\[low, high\]"),
    ([{"name": "token-overlap", "band": [0, 1]}, {"name": "exact", "band": [0, 1]}], "takes no 'band'"),
    ([{"name": "token-overlap", "band": [0, 1]}, {"name": "exact", "max_judgments": -1}], "non-negative"),
    ([{"name": "token-overlap", "band": [0, 1]}, {"name": "exact", "max_tokens": 10}], "estimates tokens"),
    ([{"band": [0, 1]}, "exact"], "table with 'name'"),
    ([{"name": "cascade", "band": [0, 1]}, "exact"], "cannot contain a cascade"),
    ([{"name": "no-such-judge", "band": [0, 1]}, "exact"], "no-such-judge"),
])
def test_bad_stages_are_evret_errors(stages: object, message: str) -> None:
    with pytest.raises(EvretError, match=message):
        create_judge("cascade", stages=stages)


def test_token_budget_stops_an_llm_stage(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_llm_env(monkeypatch, tmp_path, "OPENAI_API_KEY", "OPENAI_BASE_URL")
    with StubLLMServer(always("YES")) as server:
        llm = stub_judge("openai", server, "sk-test", base_url=server.openai_base_url, model="gpt-stub")
        one = llm.plan([CONTEXTS[2]])
        per_call = one["estimated_input_tokens"] + one["estimated_output_tokens_max"]
        cascade = CascadeJudge([{"name": "token-overlap", "band": [0.3, 0.9], "query_boost": False},
                                {"name": "exact", "band": [0.0, 1.0]}, llm])
        cascade.stages[-1].max_tokens = per_call + per_call // 2  # room for one band judgment, not two
        verdicts = cascade.batch_judge(CONTEXTS)
        assert len(server.requests) == 1
    assert verdicts == [True, False, True, True, True, None]
    stats = cascade.stats()
    assert stats["unmeasured"] == 1 and stats["last_judge_calls"] == 1
    assert stats["cost"]["openai"]["calls"] == 1
