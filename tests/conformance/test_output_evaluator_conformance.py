"""The built-in output evaluators pass the output evaluator conformance suite: ``exact``, ``regex``, and the LLM
ones (``llm-score``, the criteria judges ``direct`` and ``pairwise``) through the test kit's ``stub`` provider
against a stub server on 127.0.0.1 that grades by content."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evret_core.plugins.registry import create_evaluator
from evret_core.testing import OutputEvaluatorConformance
from evret_core.testing.llm_provider import stub_options
from evret_core.testing.llm_stubs import StubLLMServer, StubRequest, first_user_prompt, isolate_llm_env

RIGHT = ("Paris", "Rome")  # the default records' right answers


def fenced_output(prompt: str) -> str:
    match = re.search(r"<output-\w+>\n(.*?)\n</output-\w+>", prompt, re.DOTALL)
    return match.group(1) if match else ""


def grade(request: StubRequest) -> str:
    """llm-score's answer: 5 for a right answer, 2 for a wrong one."""
    return json.dumps({"score": 5 if fenced_output(first_user_prompt(request)) in RIGHT else 2, "reasoning": "r"})


def choose(request: StubRequest) -> str:
    """The direct judge's answer: "Yes" for a right answer."""
    right = fenced_output(first_user_prompt(request)) in RIGHT
    return json.dumps({"explanation": "e", "selected_option": "Yes" if right else "No"})


@pytest.fixture
def llm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[StubLLMServer]:
    isolate_llm_env(monkeypatch, tmp_path)
    with StubLLMServer() as server:
        yield server


class TestExactConformance(OutputEvaluatorConformance):
    @pytest.fixture
    def evaluator(self) -> Any:
        return create_evaluator("exact")

    def test_a_record_without_its_target_is_an_error(self, evaluator: Any) -> None:
        from evret_core.contracts.errors import EvretError

        with pytest.raises(EvretError, match=r"record 1: evaluator 'exact' needs a 'target'"):
            evaluator.evaluate([{"output": "Paris"}])


class TestRegexConformance(OutputEvaluatorConformance):
    @pytest.fixture
    def evaluator(self) -> Any:
        return create_evaluator("regex", pattern=r"^(Paris|Rome)$")


class TestLLMScoreConformance(OutputEvaluatorConformance):
    @pytest.fixture
    def evaluator(self, llm: StubLLMServer) -> Any:
        llm.responder = grade
        return create_evaluator("llm-score", template="{output}", **stub_options(llm), cache=False)


class TestDirectCriteriaJudgeConformance(OutputEvaluatorConformance):
    @pytest.fixture
    def evaluator(self, llm: StubLLMServer) -> Any:
        llm.responder = choose
        return create_evaluator("direct", criteria="Is the answer right?", **stub_options(llm), cache=False)


def compare_by_rightness(request: StubRequest) -> str:
    """The pairwise judge's answer: the right answer of each pair wins (the first on a tie)."""
    texts = [text for _, _, text in re.findall(r"^Response (\d+):\n<response_\1-(\w+)>\n(.*?)\n</response_\1-\2>",
                                               first_user_prompt(request), re.MULTILINE | re.DOTALL)]
    comparisons = [{"responses": [a + 1, b + 1], "explanation": "e",
                    "winner": (b if texts[b] in RIGHT and texts[a] not in RIGHT else a) + 1}
                   for a in range(len(texts)) for b in range(a + 1, len(texts))]
    return json.dumps({"comparisons": comparisons})


class TestPairwiseCriteriaJudgeConformance(OutputEvaluatorConformance):
    @pytest.fixture
    def evaluator(self, llm: StubLLMServer) -> Any:
        llm.responder = compare_by_rightness
        return create_evaluator("pairwise", criteria="Which answer is right?", **stub_options(llm), cache=False)

    @pytest.fixture
    def records(self) -> list[dict[str, Any]]:
        return [{"input": "What is the capital of France?", "output": {"a": "Lyon", "b": "Paris"}},
                {"input": "What is the capital of Italy?", "output": {"a": "Rome", "b": "Milan"}},
                {"input": "What is the capital of Italy?", "output": {"a": "Rome", "b": "Rome"}}]

    @pytest.fixture
    def incomplete_record(self) -> dict[str, Any]:
        return {"input": "What is the capital of Spain?", "output": {"a": "Madrid"}}  # one response: no pair
