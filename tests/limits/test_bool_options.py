"""Yes/no options have one reading (``evret_core.limits.check_bool``, in the SDK): a typo is an error naming the
option, never a silent False."""

from __future__ import annotations

import pytest

from evret_core.contracts.errors import EvretError
from evret_core.judge.lexical import ContainsJudge, TokenOverlapJudge
from evret_core.limits import check_bool


@pytest.mark.parametrize("value", [True, 1, "1", "true", " TRUE ", "yes", "On"])
def test_true_forms(value: object) -> None:
    assert check_bool(value, "opt") is True


@pytest.mark.parametrize("value", [False, 0, "0", "false", "No", "off"])
def test_false_forms(value: object) -> None:
    assert check_bool(value, "opt") is False


@pytest.mark.parametrize("value", ["ture", "", 2, None, 0.5])
def test_anything_else_names_the_option(value: object) -> None:
    with pytest.raises(EvretError, match="my option must be true or false"):
        check_bool(value, "my option")


def test_a_judge_option_typo_is_refused() -> None:
    assert ContainsJudge(remove_articles="no").remove_articles is False
    with pytest.raises(EvretError, match="token-overlap judge: option 'query_boost'"):
        TokenOverlapJudge(query_boost="flase")
