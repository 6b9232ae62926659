"""Every LLM part takes ``max_retry_after`` (an LLMSettings option) and gives a call up at once when the server
asks for a longer wait: the RAG generator, claim judge and relevance scorer, and ``evret generate``."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from evret_core.cli import main
from evret_core.contracts.errors import EvretError
from evret_core.rag import RagEvaluator
from evret_core.testing.llm_provider import stub_options
from evret_core.testing.llm_stubs import StubLLMServer, StubReply, isolate_llm_env
from evret_core.testsets.testset import TestsetGenerator

from .test_llm_parts import small_set

ABSURD = {"Retry-After": "Fri, 31 Dec 9999 23:59:59 GMT"}


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return isolate_llm_env(monkeypatch, tmp_path, "EVRET_STUB_API_KEY")


def rate_limited() -> StubLLMServer:
    return StubLLMServer(lambda r: StubReply(status=429, headers=ABSURD))


def one_warning(err: str) -> None:
    lines = [line for line in err.splitlines() if "max_retry_after" in line]
    assert len(lines) == 1 and "above the cap max_retry_after=0.5 s" in lines[0], err


@pytest.mark.parametrize("part", ["generator", "claim_judge", "relevance"])
def test_each_rag_part_gives_up_a_call_asked_to_wait_past_the_cap(part: str,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    questions, run = small_set()
    with rate_limited() as server:
        llm = {**stub_options(server), "cache": False, "retries": 3, "max_retry_after": 0.5}
        kwargs: dict[str, object] = {"generator": "extractive", "claim_judge": "token-overlap"}
        if part == "generator":
            kwargs.update(generator="llm", generator_options=llm)
        elif part == "claim_judge":
            kwargs.update(claim_judge="llm", claim_judge_options=llm)
        else:
            kwargs.update(relevance="llm", relevance_options=llm)
        started = time.monotonic()
        results = RagEvaluator(run, kwargs.pop("generator"), k=2, **kwargs).evaluate(questions)  # type: ignore[arg-type]
    assert time.monotonic() - started < 10
    assert len(server.requests) == len({r.fingerprint for r in server.requests})  # no call was retried
    stats = results.stats["llm"]
    assert any(sum(s.get("unmeasured", {}).values()) for s in stats.values() if isinstance(s, dict)), stats
    one_warning(capsys.readouterr().err)


def test_generate_gives_up_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = {f"d{i}": {"title": f"Doc {i}", "text": f"The museum number {i} opens at {i} am."} for i in range(4)}
    with rate_limited() as server:
        generator = TestsetGenerator(corpus, cache=False, retries=3, max_retry_after=0.5, **stub_options(server))
        started = time.monotonic()
        # every call given up: generate says so (nothing to write) instead of returning an empty set
        with pytest.raises(EvretError, match=r"3 of 3 generation call\(s\) failed .*above max_retry_after=0.5 s"):
            generator.generate(3, seed=0)
    assert time.monotonic() - started < 10
    assert len(server.requests) == 3
    one_warning(capsys.readouterr().err)


def test_the_option_is_checked_before_any_call(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = Path(__file__).resolve().parents[2] / "examples" / "corpus.jsonl"
    assert main(["generate", "--corpus", str(corpus), "-n", "1", "--llm-option", "max_retry_after=-1",
                 "--output", str(tmp_path / "g.jsonl")]) == 2
    assert "option 'max_retry_after': must be a number of seconds from 0 to 86400" in capsys.readouterr().err
    assert not (tmp_path / "g.jsonl").exists()
