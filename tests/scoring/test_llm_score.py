"""``llm-score`` through the core test kit's ``stub`` provider (OpenAI wire format, no provider plugin needed)
against a stub server."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evret_core import EvretError, create_evaluator
from evret_core.cli import main
from evret_core.testing.llm_provider import stub_options as provider_options
from evret_core.testing.llm_stubs import FailFirst, StubLLMServer, StubReply, StubRequest, isolate_llm_env
from evret_core.testing.llm_stubs import first_user_prompt as first_prompt


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test gets its own answer cache: answers from another test must never be reused."""
    return isolate_llm_env(monkeypatch, tmp_path)


@pytest.fixture
def stub() -> Iterator[StubLLMServer]:
    with StubLLMServer() as server:
        yield server


def messages(request: StubRequest) -> list[dict[str, Any]]:
    return list(request.body["messages"])


RECORDS = [
    {"input": "What is the capital of France?", "output": "Paris is the capital of France.",
     "context": ["Paris is the capital and largest city of France."]},
    {"input": "What is the capital of France?", "output": "I like turtles.",
     "context": ["Paris is the capital and largest city of France."]},
]


def grade_by_content(request: StubRequest) -> str:
    score = 5 if "Paris is the capital of France." in first_prompt(request) else 2
    return json.dumps({"score": score, "reasoning": f"graded {score}"})


def test_scores_are_normalised_and_averaged(stub: StubLLMServer) -> None:
    stub.responder = grade_by_content
    results = create_evaluator("llm-score", **provider_options(stub)).evaluate(RECORDS)
    assert results.scores == [1.0, 0.25]  # (5-1)/4, (2-1)/4
    assert results.mean == pytest.approx(0.625)
    assert [d["raw_score"] for d in results.details] == [5, 2]
    assert results.details[1]["reasoning"] == "graded 2"
    assert results.stats["llm"]["calls"] == 2
    assert results.stats["llm"]["input_tokens"] > 0


def test_builtin_rag_relevance_template_shows_question_context_and_answer(stub: StubLLMServer) -> None:
    stub.responder = grade_by_content
    create_evaluator("llm-score", template="rag-relevance", **provider_options(stub)).evaluate(RECORDS[:1])
    (request,) = stub.requests
    prompt = first_prompt(request)
    nonce = re.search(r"<input-(\w+)>", prompt).group(1)  # type: ignore[union-attr]
    assert f"Question:\n<input-{nonce}>\nWhat is the capital of France?\n</input-{nonce}>" in prompt
    assert (f"Retrieved context:\n<context-{nonce}>\n[1] Paris is the capital and largest city of France.\n"
            f"</context-{nonce}>") in prompt
    assert f"Answer:\n<output-{nonce}>\nParis is the capital of France.\n</output-{nonce}>" in prompt
    assert '"score"' in request.system and '"reasoning"' in request.system
    assert f"tags carrying the code {nonce}" in request.system


def test_malformed_answers_are_sent_back_with_the_parse_error(stub: StubLLMServer) -> None:
    def responder(request: StubRequest) -> str:
        turn = len(messages(request))  # system + user, then + assistant + correction per retry
        if turn == 2:
            return "Sure! I would say four out of five."
        if turn == 4:
            return '```json\n{"score": 9, "reasoning": "too high"}\n```'
        return '{"score": 4, "reasoning": "relevant, minor gap"}'

    stub.responder = responder
    results = create_evaluator("llm-score", **provider_options(stub)).evaluate(RECORDS[:1])
    assert results.scores == [0.75]
    assert results.details[0]["tries"] == 3
    assert len(stub.requests) == 3
    second, third = messages(stub.requests[1]), messages(stub.requests[2])
    assert second[2] == {"role": "assistant", "content": "Sure! I would say four out of five."}
    assert "invalid JSON" in second[3]["content"]
    assert "'score' must be an integer from 1 to 5, got 9" in third[-1]["content"]


def test_unmeasured_after_three_tries_is_reported_not_guessed(stub: StubLLMServer) -> None:
    def responder(request: StubRequest) -> str:
        if "I like turtles." in first_prompt(request):
            return "no JSON here"
        return '{"score": 3, "reasoning": "partly"}'

    stub.responder = responder
    results = create_evaluator("llm-score", **provider_options(stub)).evaluate(RECORDS)
    assert results.scores == [0.5, None]
    assert results.unmeasured == [1]
    assert results.mean == 0.5  # over the measured record only
    assert "no usable answer after 3 tries" in results.details[1]["error"]
    assert sum("I like turtles." in first_prompt(r) for r in stub.requests) == 3


def test_placeholders_checked_against_every_record_before_any_call(stub: StubLLMServer) -> None:
    stub.responder = grade_by_content
    evaluator = create_evaluator("llm-score", template="Q: {input}\nA: {output}\nSources: {sources}",
                                 **provider_options(stub))
    records = [dict(RECORDS[0], sources="a"), dict(RECORDS[1])]
    with pytest.raises(EvretError, match=r"record 2: the llm-score template reads \{sources\}"):
        evaluator.evaluate(records)
    assert stub.requests == []


def test_bad_template_and_unknown_provider_rejected_at_creation(stub: StubLLMServer) -> None:
    with pytest.raises(EvretError, match="must name a record field"):
        create_evaluator("llm-score", template="Grade {0}", **provider_options(stub))
    with pytest.raises(EvretError, match="no placeholder"):
        create_evaluator("llm-score", template="Grade it.", **provider_options(stub))
    with pytest.raises(EvretError, match="unknown llm provider 'nope'"):
        create_evaluator("llm-score", provider="nope")


def test_score_cli_with_llm_score(stub: StubLLMServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stub.responder = grade_by_content
    records = tmp_path / "records.jsonl"
    records.write_text("".join(json.dumps(r) + "\n" for r in RECORDS), encoding="utf-8")
    out = tmp_path / "scores.jsonl"
    argv = ["score", "--evaluator", "llm-score", str(records), "--output", str(out)]
    for key, value in provider_options(stub).items():
        argv += ["--option", f"{key}={value}"]
    assert main(argv) == 0
    assert "mean 0.6250 over 2 records" in capsys.readouterr().out
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["record"], r["score"], r["raw_score"]) for r in rows] == [(1, 1.0, 5), (2, 0.25, 2)]


def test_transient_server_errors_are_retried_by_the_client_not_counted_as_tries(stub: StubLLMServer) -> None:
    stub.responder = FailFirst(grade_by_content, times=1, status=503, retry_after=0)
    results = create_evaluator("llm-score", **provider_options(stub)).evaluate(RECORDS)
    assert results.scores == [1.0, 0.25]
    assert [d["tries"] for d in results.details] == [1, 1]
    assert results.stats["llm"]["retries"] == 2
    assert len(stub.requests) == 4


def test_bad_api_key_stops_the_run_instead_of_marking_everything_unmeasured(stub: StubLLMServer) -> None:
    stub.responder = lambda request: StubReply(status=401)
    with pytest.raises(EvretError, match="HTTP 401"):
        create_evaluator("llm-score", **provider_options(stub)).evaluate(RECORDS)


def test_score_cli_lists_unmeasured_records(stub: StubLLMServer, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    stub.responder = lambda request: "{not json" if "turtles" in first_prompt(request) else grade_by_content(request)
    records = tmp_path / "records.jsonl"
    records.write_text("".join(json.dumps(r) + "\n" for r in RECORDS), encoding="utf-8")
    argv = ["score", "--evaluator", "llm-score", str(records)]
    for key, value in provider_options(stub).items():
        argv += ["--option", f"{key}={value}"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "mean 1.0000 over 2 records (1 unmeasured, left out of the mean)" in captured.out
    assert "unmeasured: record 2: no usable answer after 3 tries" in captured.err


def test_answers_are_cached_so_a_rerun_pays_only_for_what_is_missing(stub: StubLLMServer, private_cache: Path) -> None:
    stub.responder = lambda request: "{not json" if "turtles" in first_prompt(request) else grade_by_content(request)
    first = create_evaluator("llm-score", **provider_options(stub)).evaluate(RECORDS)
    assert first.scores == [1.0, None]
    assert len(stub.requests) == 1 + 3
    assert (private_cache / "judgments.sqlite3").exists()

    stub.reset()
    stub.responder = grade_by_content
    second = create_evaluator("llm-score", **provider_options(stub)).evaluate(RECORDS)
    assert second.scores == [1.0, 0.25]
    assert [first_prompt(r).count("turtles") for r in stub.requests] == [1]  # only the unmeasured record again
    assert second.stats["llm"]["cache_hits"] == 1
    assert second.details[0]["tries"] == 0

    stub.reset()
    third = create_evaluator("llm-score", cache=False, **provider_options(stub)).evaluate(RECORDS)
    assert third.scores == [1.0, 0.25] and len(stub.requests) == 2
