"""The keywords judge passes Evret's judge conformance suite and its own cases."""

from __future__ import annotations

import pytest
from evret_judge_keywords import KeywordJudge

from evret_core import JudgmentContext, create_judge
from evret_core.testing import JudgeConformance


class TestKeywordJudgeConformance(JudgeConformance):
    @pytest.fixture
    def judge(self) -> KeywordJudge:
        return KeywordJudge()


def test_registered_by_name() -> None:
    assert isinstance(create_judge("keywords", min_fraction=0.5), KeywordJudge)


def test_fraction_of_keywords() -> None:
    context = JudgmentContext(query="q", expected_text="queens lay many eggs daily",
                              retrieved_text="A queen can lay many eggs")
    # keywords: queens, many, eggs, daily; found: many, eggs -> 0.5
    assert create_judge("keywords", min_fraction=0.5).judge(context)
    assert not create_judge("keywords", min_fraction=0.75).judge(context)
