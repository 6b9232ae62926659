"""The judge contract, as tests: a plugin's test class subclasses :class:`JudgeConformance`."""

from __future__ import annotations

import json
from typing import Any

import pytest

from evret_core.contracts import kinds
from evret_core.contracts.judge import JudgmentContext
from evret_core.testing.suite import Conformance


class JudgeConformance(Conformance):
    """Tests every judge must pass. Override the ``judge`` fixture; override ``matching_contexts`` and
    ``non_matching_contexts`` when your judge needs other examples (the defaults: identical texts match,
    texts on unrelated topics do not)."""

    kind = kinds.JUDGE

    @pytest.fixture
    def subject(self, judge: Any) -> Any:
        return judge

    @pytest.fixture
    def judge(self) -> Any:
        raise NotImplementedError("override the `judge` fixture to return the judge under test")

    @pytest.fixture
    def matching_contexts(self) -> list[JudgmentContext]:
        return [
            JudgmentContext(query="What is the capital of France?",
                            expected_text="Paris is the capital of France",
                            retrieved_text="Paris is the capital of France"),
            JudgmentContext(query="How many legs does a spider have?",
                            expected_text="Spiders have eight legs",
                            retrieved_text="Spiders have eight legs"),
        ]

    @pytest.fixture
    def non_matching_contexts(self) -> list[JudgmentContext]:
        return [
            JudgmentContext(query="What is the capital of France?",
                            expected_text="Paris is the capital of France",
                            retrieved_text="Photosynthesis converts light into chemical energy in plants"),
            JudgmentContext(query="How many legs does a spider have?",
                            expected_text="Spiders have eight legs",
                            retrieved_text="The stock market closed higher on Tuesday"),
        ]

    def test_has_a_name(self, judge: Any) -> None:
        assert isinstance(judge.name, str) and judge.name

    def test_matching_contexts_match(self, judge: Any, matching_contexts: list[JudgmentContext]) -> None:
        assert [judge.judge(c) for c in matching_contexts] == [True] * len(matching_contexts)

    def test_non_matching_contexts_do_not_match(
        self, judge: Any, non_matching_contexts: list[JudgmentContext]
    ) -> None:
        assert [judge.judge(c) for c in non_matching_contexts] == [False] * len(non_matching_contexts)

    def test_judge_returns_bool(self, judge: Any, matching_contexts: list[JudgmentContext]) -> None:
        assert all(type(judge.judge(c)) is bool for c in matching_contexts)

    def test_batch_judge_agrees_with_judge_and_keeps_order(
        self,
        judge: Any,
        matching_contexts: list[JudgmentContext],
        non_matching_contexts: list[JudgmentContext],
    ) -> None:
        mixed: list[JudgmentContext] = []
        for pos, neg in zip(matching_contexts, non_matching_contexts, strict=False):
            mixed += [neg, pos]
        one_by_one = [judge.judge(c) for c in mixed]
        assert list(judge.batch_judge(mixed)) == one_by_one
        assert list(judge.batch_judge(mixed[::-1])) == one_by_one[::-1]

    def test_batch_judge_answers_duplicates_alike(self, judge: Any, matching_contexts: list[JudgmentContext]) -> None:
        context = matching_contexts[0]
        assert list(judge.batch_judge([context, context, context])) == [True, True, True]

    def test_batch_judge_of_nothing_is_empty(self, judge: Any) -> None:
        assert list(judge.batch_judge([])) == []

    def test_an_alias_matches_like_the_expected_text(self, judge: Any, matching_contexts: list[JudgmentContext],
                                                     non_matching_contexts: list[JudgmentContext]) -> None:
        # the matching text moved into the aliases, behind an expected text that does not match
        for pos, neg in zip(matching_contexts, non_matching_contexts, strict=False):
            moved = JudgmentContext(query=pos.query, expected_text=neg.retrieved_text + " zq",
                                    aliases=pos.expected_variants, retrieved_text=pos.retrieved_text)
            assert judge.judge(moved) is True
            assert list(judge.batch_judge([moved])) == [True]

    def test_batch_score_agrees_with_the_verdicts(
        self, judge: Any, matching_contexts: list[JudgmentContext], non_matching_contexts: list[JudgmentContext]
    ) -> None:
        contexts = [*matching_contexts, *non_matching_contexts]
        verdicts = list(judge.batch_judge(contexts))
        scores = list(judge.batch_score(contexts))
        assert len(scores) == len(contexts)
        assert all(s is None or 0.0 <= s <= 1.0 for s in scores)
        if judge.threshold is None:
            assert scores == [None if v is None else float(v) for v in verdicts]
        else:
            assert [None if s is None else s >= judge.threshold for s in scores] == verdicts

    def test_config_is_json_with_the_name(self, judge: Any) -> None:
        config = judge.config()
        assert config["name"] == judge.name
        json.dumps(config)

    def test_grades_agree_with_the_verdicts(
        self, judge: Any, matching_contexts: list[JudgmentContext], non_matching_contexts: list[JudgmentContext]
    ) -> None:
        contexts = [*matching_contexts, *non_matching_contexts]
        verdicts = list(judge.batch_judge(contexts))
        grades = list(judge.batch_grade(contexts))
        top = judge.grades if judge.grades is not None else 1
        assert len(grades) == len(contexts)
        assert all(g is None or (type(g) is float and 0.0 <= g <= top) for g in grades), grades
        if judge.grades is None:
            assert grades == [None if v is None else float(v) for v in verdicts]
        else:  # a graded judge's verdict is its grade at its cut
            assert judge.cut is not None and 0 < judge.cut <= judge.grades
            assert [None if g is None else g >= judge.cut for g in grades] == verdicts

    def test_a_reference_free_judge_never_reads_the_expected_answer(
        self, judge: Any, matching_contexts: list[JudgmentContext], non_matching_contexts: list[JudgmentContext]
    ) -> None:
        if not judge.reference_free:
            pytest.skip("the judge compares with the expected answer")
        contexts = [*matching_contexts, *non_matching_contexts]
        blanked = [JudgmentContext(query=c.query, expected_text="", retrieved_text=c.retrieved_text)
                   for c in contexts]
        swapped = [JudgmentContext(query=c.query, expected_text="zq unrelated words", retrieved_text=c.retrieved_text)
                   for c in contexts]
        grades = list(judge.batch_grade(contexts))
        assert list(judge.batch_grade(blanked)) == grades == list(judge.batch_grade(swapped))
