"""`evret rag`: the bundled example end to end, --dry-run, and one-line errors with exit status 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evret_core.cli import main
from evret_core.rag import RagResults

from .conftest import EXAMPLE, squad_path


def test_example_config_runs_offline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "rag.json"
    assert main(["rag", "--config", str(EXAMPLE / "rag.toml"), "--resamples", "50", "--output", str(output)]) == 0
    printed = capsys.readouterr().out
    for section in ("retrieval (retrieved condition", "[gold]", "[retrieved]", "attribution", "retrieved - gold"):
        assert section in printed
    results = RagResults.from_json(output)
    assert results.conditions == ["gold", "retrieved"] and len(results.per_question) == 13
    refuse = [q for q in results.per_question.values() if q.expected_behaviour == "refuse"]
    assert len(refuse) == 4 and all(q.conditions["retrieved"].answer.refused for q in refuse)  # type: ignore[union-attr]
    assert results.generation["retrieved"]["correct_refusal_rate"] == 1.0
    assert results.config["generator"] == {"name": "extractive", "threshold": 0.5, "answer": "span"}
    assert results.config["k"] == 3 and results.retrieval["precision@3"] > 0


def test_command_line_options_win_over_the_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "rag.json"
    assert main(["rag", "--config", str(EXAMPLE / "rag.toml"), "--conditions", "gold", "--generator-option",
                 "threshold=0", "--resamples", "10", "--output", str(output)]) == 0
    results = RagResults.from_json(output)
    assert results.conditions == ["gold"] and results.retrieval == {} and results.attribution == {}
    assert results.generation["gold"]["refused"] == 4 / 13  # threshold 0: only the context-less refuse questions


def test_dry_run_counts_generator_calls(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rag", "--dataset", str(squad_path()), "--retriever", "bm25", "--generator", "extractive",
                 "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "706 question(s) x 2 condition(s) (gold, retrieved): 1412 generator call(s)" in out
    assert "make no LLM calls" in out


@pytest.mark.parametrize(("argv", "message"), [
    (["rag", "--generator", "extractive"], "missing --dataset"),
    (["rag", "--dataset", "{q}", "--corpus", "{c}", "--generator", "extractive"], "needs --retriever"),
    (["rag", "--dataset", "{q}", "--corpus", "{c}", "--generator", "nope", "--conditions", "gold"],
     "unknown generator 'nope'"),
    (["rag", "--dataset", "{bad}", "--generator", "extractive", "--conditions", "gold"], "bad.jsonl:2: "),
    (["rag", "--dataset", "{q}", "--corpus", "{c}", "--generator", "extractive", "--conditions", "gold,noisy"],
     "unknown condition 'noisy'"),
    (["rag", "--config", "{toml}"], "rag.toml: option 'k': has the wrong type"),
    (["rag", "--dataset", "{q}", "--corpus", "{c}", "--generator", "extractive", "--conditions", "gold",
      "--output", "{tmp}/no/such/out.json"], "folder .* does not exist"),
])
def test_errors_are_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                                        message: str) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "ok?", "answers": ["a"]}\n{"question": 3}\n', encoding="utf-8")
    toml = tmp_path / "rag.toml"
    toml.write_text('dataset = "x.jsonl"\ngenerator = "extractive"\nk = "five"\n', encoding="utf-8")
    paths = {"q": str(EXAMPLE / "questions.jsonl"), "c": str(EXAMPLE / "corpus.jsonl"), "bad": str(bad),
             "toml": str(toml), "tmp": str(tmp_path)}
    assert main([a.format(**paths) for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("evret: error: ") and "\n" not in err
    import re

    assert re.search(message, err), err


def test_results_json_is_plain_json(tmp_path: Path) -> None:
    output = tmp_path / "rag.json"
    assert main(["rag", "--config", str(EXAMPLE / "rag.toml"), "--resamples", "10", "--output", str(output)]) == 0
    data = json.loads(output.read_text(encoding="utf-8"))  # no NaN: values that do not apply are null
    assert data["schema"] == "evret-rag" and data["schema_version"] == 1
    assert "NaN" not in output.read_text(encoding="utf-8")
