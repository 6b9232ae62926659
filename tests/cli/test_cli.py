"""`evret evaluate` and `evret plugins`: success, config files, and every bad-input case (exit 2, one message)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evret_core.cli import main

CORPUS_FREE_RUN = """
from evret_core import hookimpl, RetrievalResult

DOCS = {"d1": "The queen lays eggs", "d2": "Varroa mites are pests", "d3": None}

class Tiny:
    def __init__(self, missing_text=False):
        self.missing_text = missing_text
    def retrieve(self, query, k):
        words = set(query.lower().split())
        hits = [(sum(w in (t or "").lower() for w in words), d) for d, t in DOCS.items()]
        ranked = [d for s, d in sorted(hits, key=lambda h: (-h[0], h[1])) if s > 0 or self.missing_text]
        return [RetrievalResult(doc_id=d, metadata={} if self.missing_text else {"text": DOCS[d]})
                for d in ranked[:k]]
    def batch_retrieve(self, queries, k):
        return [self.retrieve(q, k) for q in queries]

@hookimpl
def register_retrievers(register):
    register("tiny", Tiny)
"""


@pytest.fixture
def env(tmp_path: Path, fake_plugin, monkeypatch: pytest.MonkeyPatch) -> Path:  # type: ignore[no-untyped-def]
    fake_plugin("evret-tiny", CORPUS_FREE_RUN)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data.jsonl").write_text(
        json.dumps({"query_id": "q1", "query": "queen eggs", "expected_answers": ["the queen lays eggs"]}) + "\n"
        + json.dumps({"query_id": "q2", "query": "varroa", "expected_answers": ["varroa mites are pests"],
                      "tags": {"topic": "health"}}) + "\n",
        encoding="utf-8",
    )
    return tmp_path


BASE = ["evaluate", "--dataset", "data.jsonl", "--retriever", "tiny", "--judge", "token-overlap",
        "--metric", "recall@2", "--metric", "mrr@2"]


def test_evaluate_prints_the_table_and_writes_results(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*BASE, "--output", "out.json", "--judge-option", "min_tokens=1"]) == 0
    out = capsys.readouterr().out
    assert "recall@2  1.000 [1.000, 1.000]" in out and "mrr@2     1.000 [1.000, 1.000]" in out
    data = json.loads((env / "out.json").read_text())
    assert data["config"]["judge"]["min_tokens"] == 1 and set(data["per_query"]) == {"q1", "q2"}


def test_config_file_and_command_line_overrides(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (env / "sub").mkdir()
    (env / "sub" / "eval.toml").write_text(
        'dataset = "../data.jsonl"\nmetrics = ["precision@1"]\nmatching = "any_match"\noutput = "r.json"\n'
        '[retriever]\nname = "tiny"\n[judge]\nname = "token-overlap"\noverlap_ratio = 0.5\n',
        encoding="utf-8",
    )
    assert main(["evaluate", "--config", "sub/eval.toml", "--metric", "hit_rate@1"]) == 0
    assert "hit_rate@1" in capsys.readouterr().out
    data = json.loads((env / "sub" / "r.json").read_text())  # paths are relative to the config file
    assert data["metrics"] == ["hit_rate@1"] and data["config"]["matching"] == "any_match"
    assert data["config"]["judge"]["overlap_ratio"] == 0.5


BAD_CASES = {
    "malformed dataset line": (["--dataset", "bad.jsonl"], "bad.jsonl:2: invalid JSON"),
    "dataset field": (["--dataset", "badfield.jsonl"], "badfield.jsonl:1: field 'query' is missing"),
    "unknown judge": (["--judge", "nope"], "unknown judge 'nope'; known judges: cascade, contains, exact, llm, "),  # + installed plugins' judges
    "unknown metric": (["--metric", "nope@3"], "unknown metric 'nope'; known metrics: "),
    "bad metric cutoff": (["--metric", "recall@x"], "bad metric name 'recall@x'"),
    "unknown retriever": (["--retriever", "nope"], "unknown retriever 'nope'; known retrievers: "),
    "bad judge option": (["--judge-option", "overlap_ratio=7"], "overlap_ratio must be in (0, 1], got 7.0"),
    "unknown judge option": (["--judge-option", "colour=red"], "judge 'token-overlap': option 'colour' (from --judge-option) is not an option"),
    "option syntax": (["--judge-option", "colour"], "--judge-option 'colour': write it as KEY=VALUE"),
    "result without text": (["--retriever-option", "missing_text=true"], "has no text"),
    "missing output folder": (["--output", "no/such/out.json"], "folder no/such does not exist"),
    "missing dataset": (["--dataset", "none.jsonl"], "none.jsonl: no such file"),
    "bad config value": (["--config", "bad.toml"], "bad.toml: option 'k': must be an integer from 1 to 100000, got -1"),
    "unknown config key": (["--config", "typo.toml"], "typo.toml: option 'metric': unknown setting"),
    "invalid toml": (["--config", "broken.toml"], "broken.toml: invalid TOML"),
}


@pytest.mark.parametrize("case", list(BAD_CASES))
def test_bad_input_exits_2_with_one_message_and_writes_nothing(
    env: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    (env / "bad.jsonl").write_text('{"query": "ok", "expected_answers": ["a"]}\n{"query": oops}\n')
    (env / "badfield.jsonl").write_text('{"query_id": "x"}\n')
    (env / "bad.toml").write_text('k = -1\n')
    (env / "typo.toml").write_text('metric = ["recall@2"]\n')
    (env / "broken.toml").write_text('metrics = [\n')
    extra, message = BAD_CASES[case]
    assert main([*BASE, *extra, "--output", "out.json"] if "--output" not in extra else [*BASE, *extra]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("evret: error: "), captured.err
    assert message in lines[0]
    assert "Traceback" not in captured.err + captured.out
    assert not (env / "out.json").exists()
    assert not list(env.glob(".out.json.*"))


def test_debug_shows_the_traceback(env: Path) -> None:
    from evret_core import UnknownNameError

    with pytest.raises(UnknownNameError):
        main([*BASE, "--judge", "nope", "--debug"])
    with pytest.raises(UnknownNameError):
        main(["--debug", *BASE, "--judge", "nope"])


def test_missing_required_setting(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["evaluate", "--dataset", "data.jsonl", "--metric", "recall@1"]) == 2
    assert "missing --retriever" in capsys.readouterr().err


def test_plugins_command(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plugins"]) == 0
    out = capsys.readouterr().out
    assert "evret-tiny 0.1.0" in out and "retrievers: tiny" in out and "evret-core" not in out
    assert main(["plugins", "--all", "--json"]) == 0
    listed = {p["name"]: p for p in json.loads(capsys.readouterr().out)}
    assert listed["evret-core:metrics"]["builtin"] is True
    assert listed["evret-tiny"]["registers"] == {"retriever": ["tiny"]}
