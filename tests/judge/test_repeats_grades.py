"""``repeats`` of a graded judge: the median grade of the samples that answered (an even count: the lower median),
the agreement rate as the share of answers equal to it, the verdict at the judge's cut; yes/no judges unchanged."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from evret_core import create_judge
from evret_core.contracts.judge import JudgmentContext, reference_free_context
from evret_core.evaluation.executors import LocalExecutor
from evret_core.judge.repeats import RepeatedJudge
from evret_core.testing.llm_provider import stub_options
from evret_core.testing.llm_stubs import StubLLMServer, StubReply, StubRequest, isolate_llm_env

SAMPLE = re.compile(r"sample (\d+) of \d+")
PASSAGE = re.compile(r"<passage-([0-9a-f]+)>\n(.*?)\n</passage-\1>", re.S)


def scripted(grades: dict[str, list[int | None]]) -> object:
    """Sample i's answer for a passage: ``grades[passage][i]`` (None: the call fails with HTTP 500)."""

    def respond(request: StubRequest) -> str | StubReply:
        sample = SAMPLE.search(request.system)
        passage = PASSAGE.search(request.prompt)
        assert sample and passage, request.text
        grade = grades[passage.group(2)][int(sample.group(1)) - 1]
        return StubReply(status=500) if grade is None else json.dumps({"grade": grade})

    return respond


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> object:
    isolate_llm_env(monkeypatch, tmp_path, "EVRET_STUB_API_KEY")
    with StubLLMServer() as stub:
        yield stub


def repeats_of_relevance(server: StubLLMServer, repeats: int) -> RepeatedJudge:
    judge = create_judge("repeats", judge="relevance", repeats=repeats,
                         options={**stub_options(server), "cache": False, "max_retries": 0})
    assert isinstance(judge, RepeatedJudge)
    return judge


def test_the_median_grade_of_three_samples_and_its_agreement(server: StubLLMServer) -> None:
    server.responder = scripted({"a": [3, 1, 2], "b": [0, 0, 3], "c": [2, 2, 2]})
    judge = repeats_of_relevance(server, 3)
    assert (judge.grades, judge.cut, judge.reference_free) == (3, 2, True)
    contexts = [reference_free_context("q", p) for p in "abc"]
    assert judge.batch_grade(contexts) == [2.0, 0.0, 2.0]
    assert [judge.agreement(c) for c in contexts] == [pytest.approx(1 / 3), pytest.approx(2 / 3), 1.0]
    stats = judge.stats()
    assert stats["unanimous"] == 1 and stats["agreement_rate"] == pytest.approx((1 / 3 + 2 / 3 + 1) / 3)
    assert judge.batch_judge(contexts) == [True, False, True]  # the median at the cut, 2


def test_an_even_count_takes_the_lower_median_and_a_silent_sample_is_left_out(server: StubLLMServer) -> None:
    # four samples: 1, 3, 2, 3 -> sorted 1 2 3 3 -> lower median 2; three answers of four: 0 2 3 -> 2
    server.responder = scripted({"even": [1, 3, 2, 3], "gap": [3, None, 0, 2], "none": [None] * 4})
    judge = repeats_of_relevance(server, 4)
    contexts = [reference_free_context("q", p) for p in ("even", "gap", "none")]
    assert judge.batch_grade(contexts) == [2.0, 2.0, None]
    assert judge.agreement(contexts[0]) == pytest.approx(1 / 4)
    assert judge.agreement(contexts[1]) == pytest.approx(1 / 3)  # of the three that answered
    assert judge.agreement(contexts[2]) is None and judge.stats()["unanswered"] == 1
    run = LocalExecutor().grade(judge, contexts, 10, lambda done: None)
    assert run.grades == [2.0, 2.0, None] and run.verdicts == [True, True, None]


def test_a_yes_no_judge_keeps_the_majority_verdict() -> None:
    judge = RepeatedJudge("contains", repeats=3)
    assert (judge.grades, judge.cut, judge.reference_free) == (None, None, False)
    context = JudgmentContext(query="q", expected_text="paris", retrieved_text="Paris is in France")
    assert judge.batch_judge([context]) == [True] and judge.batch_grade([context]) == [1.0]
    assert judge.agreement(context) == 1.0
