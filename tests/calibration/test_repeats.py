"""The repeats judge: N samples of an LLM judge through the real openai SDK against the stub server."""

from __future__ import annotations

from pathlib import Path

import pytest

from evret_core import create_judge
from evret_core.contracts.errors import EvretError
from evret_core.contracts.judge import JudgmentContext
from evret_core.testing.llm_stubs import StubLLMServer, StubRequest, isolate_llm_env


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_llm_env(monkeypatch, tmp_path, "OPENAI_API_KEY", "OPENAI_BASE_URL")


def ctx(expected: str) -> JudgmentContext:
    return JudgmentContext(query="q", expected_text=expected, retrieved_text="some passage")


def flaky(request: StubRequest) -> str:
    # "steady" always matches; "shaky" matches for samples 1 and 2 of 3; "split" for sample 1 of 2
    if "steady" in request.prompt:
        return "YES"
    if "shaky" in request.prompt:
        return "NO" if "sample 3 of" in request.system else "YES"
    return "YES" if "sample 1 of" in request.system else "NO"


def judge(server: StubLLMServer, repeats: int) -> object:
    return create_judge("repeats", repeats=repeats, options={
        "provider": "openai", "model": "gpt-stub", "api_key": "sk-test", "base_url": server.openai_base_url,
        "temperature": 0.7, "cache": False})


def test_majority_and_agreement_rate() -> None:
    with StubLLMServer(flaky) as server:
        repeated = judge(server, 3)
        contexts = [ctx("steady"), ctx("shaky")]
        assert repeated.batch_judge(contexts) == [True, True]  # type: ignore[attr-defined]
        assert len(server.requests) == 6
    assert repeated.agreement(contexts[0]) == 1.0  # type: ignore[attr-defined]
    assert repeated.agreement(contexts[1]) == pytest.approx(2 / 3)  # type: ignore[attr-defined]
    stats = repeated.stats()  # type: ignore[attr-defined]
    assert stats["agreement_rate"] == pytest.approx((1 + 2 / 3) / 2)
    assert stats["unanimous"] == 1 and stats["ties"] == 0 and stats["cost"]["openai"]["calls"] == 6


def test_a_tie_is_unmeasured_not_guessed() -> None:
    with StubLLMServer(flaky) as server:
        repeated = judge(server, 2)
        assert repeated.batch_judge([ctx("split")]) == [None]  # type: ignore[attr-defined]
        with pytest.raises(EvretError, match="no majority"):
            repeated.judge(ctx("split"))  # type: ignore[attr-defined]
    assert repeated.stats()["ties"] == 2  # type: ignore[attr-defined]


@pytest.mark.parametrize(("options", "message"), [
    ({"repeats": 1}, "integer >= 2"), ({"repeats": "3"}, "integer >= 2"),
    ({"judge": "cascade"}, "plain registered judge"), ({"judge": "exact", "options": [1]}, "table"),
])
def test_bad_options(options: dict[str, object], message: str) -> None:
    with pytest.raises(EvretError, match=message):
        create_judge("repeats", **options)
