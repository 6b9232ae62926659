"""evret generate when the LLM calls fail (red-team G11): no question kept because calls failed is an error that
counts the failures and names the first reasons, and no empty question file is left behind; a run that kept some
questions still writes them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evret_core.cli import main
from evret_core.contracts.errors import EvretError
from evret_core.testing.llm_provider import stub_options
from evret_core.testing.llm_stubs import StubLLMServer, StubReply, StubRequest, isolate_llm_env
from evret_core.testsets import TestsetGenerator, stratified_sample

CORPUS = {f"d{i}": {"title": f"Hive {i}", "text": f"Hive {i} holds {i + 2} thousand bees in the warmest month."}
          for i in range(6)}

FAILURES = {
    "r500": lambda request: StubReply(status=500),
    "garbage": lambda request: "\x00 garbage <<<>>> not json",
    "partialjson": lambda request: StubReply(body={"id": "x", "choices": [{"message": {"content": "YE"}}]}),
}


def good_or_fail(request: StubRequest) -> str | StubReply:
    """Answers the questions on hive 0 and 1 (a factoid whose answer is in its document); fails the others."""
    if "own knowledge" in request.system:  # the closed-book check: the model does not know
        return json.dumps({"answer": ""})
    for i in (0, 1):
        if f"Hive {i} holds" in request.prompt:
            return json.dumps({"question": f"How many bees does hive {i} hold at most?",
                               "answer": f"{i + 2} thousand"})
    return StubReply(status=500)


def _cli(server: StubLLMServer, corpus: Path, out: Path) -> int:
    options = stub_options(server)
    return main(["generate", "--json", "--corpus", str(corpus), "-n", "6", "--types", "factoid=1", "--provider", "stub",
                 "--model", options["model"], "--llm-option", f"base_url={options['base_url']}",
                 "--llm-option", "api_key=sk-stub", "--llm-option", "retries=0", "--llm-option", "cache=off",
                 "--output", str(out)])


@pytest.mark.parametrize("mode", sorted(FAILURES))
def test_every_call_failing_is_an_error_and_writes_nothing(mode: str, monkeypatch: pytest.MonkeyPatch,
                                                           tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    isolate_llm_env(monkeypatch, tmp_path, "OPENAI_API_KEY")
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": d, **v}) + "\n" for d, v in CORPUS.items()))
    out = tmp_path / "testset.jsonl"
    with StubLLMServer(FAILURES[mode]) as server:
        assert _cli(server, corpus, out) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("evret: error: no question generated: 6 of 6 generation call(s) failed")
    assert ("HTTP 500" if mode == "r500" else "invalid JSON") in err  # the first reason, on the same line
    assert "sk-stub" not in err
    assert not out.exists()


def test_the_library_raises_with_the_counts(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_llm_env(monkeypatch, tmp_path, "OPENAI_API_KEY")
    with StubLLMServer(FAILURES["r500"]) as server:
        generator = TestsetGenerator(CORPUS, cache="off", retries=0, **stub_options(server))
        with pytest.raises(EvretError, match=r"3 of 3 generation call\(s\) failed .*HTTP 500"):
            generator.generate(3, samples=stratified_sample(CORPUS, 3, seed=0, mix={"factoid": 1.0}))


def test_a_run_that_kept_questions_still_writes_them(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    isolate_llm_env(monkeypatch, tmp_path, "OPENAI_API_KEY")
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": d, **v}) + "\n" for d, v in CORPUS.items()))
    out = tmp_path / "testset.jsonl"
    with StubLLMServer(good_or_fail) as server:
        assert _cli(server, corpus, out) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert summary["kept"] == len(rows) == 2 and summary["unmeasured"] == 4
    assert {r["gold_doc_ids"][0] for r in rows} == {"d0", "d1"}
    assert captured.err.count("WARNING:") == 4 and "2 question(s) written" in captured.err
