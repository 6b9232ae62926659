"""The dependency-free output evaluator types on the documented examples, and the `evret score` command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evret_core import EvretError, create_evaluator
from evret_core.cli import main


@pytest.mark.parametrize(
    ("output", "target", "expected"),
    [
        ("Hello!", "Hello!", 1.0),
        ("Hello, world!", "Hello!", 0.0),
        ("Hello!", "hello!", 0.0),
        ("Hello!", "Hello!\n", 0.0),
    ],
)
def test_exact_documented_examples(output: str, target: str, expected: float) -> None:
    results = create_evaluator("exact").evaluate([{"input": "greet", "output": output, "target": target}])
    assert results.scores == [expected]
    assert results.mean == expected


@pytest.mark.parametrize(
    ("pattern", "output", "expected"),
    [
        (r"\w+!", "Hello!", 1.0),
        (r"Hel+o, \w+!", "Hello, world!", 1.0),
        (r"\d+", "Hello!", 0.0),
    ],
)
def test_regex_documented_examples(pattern: str, output: str, expected: float) -> None:
    results = create_evaluator("regex", pattern=pattern).evaluate([{"input": None, "output": output}])
    assert results.scores == [expected]


def test_mean_and_per_record_scores() -> None:
    records = [
        {"output": "Hello!", "target": "Hello!"},
        {"output": "Hello!", "target": "hello!"},
        {"output": "a", "target": "a"},
        {"output": "b", "target": "c"},
    ]
    results = create_evaluator("exact").evaluate(records)
    assert results.scores == [1.0, 0.0, 1.0, 0.0]
    assert results.mean == 0.5
    assert results.unmeasured == []


def test_regex_searches_anywhere_and_needs_no_target() -> None:
    evaluator = create_evaluator("regex", pattern=r"\d{4}")
    assert evaluator.evaluate([{"output": "founded in 1998, sold"}]).scores == [1.0]
    assert evaluator.evaluate([{"output": "no digits"}]).scores == [0.0]


def test_invalid_regex_rejected_at_creation() -> None:
    with pytest.raises(EvretError, match=r"pattern.*not a valid regular expression"):
        create_evaluator("regex", pattern="(unclosed")
    with pytest.raises(EvretError, match="'pattern' is required"):
        create_evaluator("regex")


def test_missing_target_fails_before_any_work_naming_the_record() -> None:
    records = [{"output": "x", "target": "x"}, {"output": "y", "target": "y"}, {"output": "z"}]
    with pytest.raises(EvretError, match=r"record 3: .*'exact' needs a 'target'"):
        create_evaluator("exact").evaluate(records)


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_score_cli_prints_mean_and_writes_per_record_scores(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    records = _write(tmp_path / "records.jsonl", [
        json.dumps({"id": "a", "input": "hi", "output": "Hello!", "target": "Hello!"}),
        "",
        json.dumps({"id": "b", "input": "hi", "output": "Hello, world!", "target": "Hello!"}),
    ])
    out = tmp_path / "scores.jsonl"
    assert main(["score", "--evaluator", "exact", str(records), "--output", str(out)]) == 0
    assert "mean 0.5000 over 2 records" in capsys.readouterr().out
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows == [{"record": 1, "id": "a", "score": 1.0}, {"record": 2, "id": "b", "score": 0.0}]


def test_score_cli_passes_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = _write(tmp_path / "r.jsonl", [json.dumps({"output": "Hello!"}), json.dumps({"output": "Bye"})])
    assert main(["score", "--evaluator", "regex", "--option", r"pattern=\w+!", str(records)]) == 0
    assert "mean 0.5000 over 2 records" in capsys.readouterr().out


def test_score_cli_bad_jsonl_names_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = _write(tmp_path / "bad.jsonl", [json.dumps({"output": "a", "target": "a"}), "{not json"])
    assert main(["score", "--evaluator", "exact", str(records)]) == 2
    err = capsys.readouterr().err
    assert f"{records}:2: invalid JSON" in err
    assert "Traceback" not in err


def test_score_cli_non_object_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = _write(tmp_path / "bad.jsonl", ["[1, 2]"])
    assert main(["score", "--evaluator", "exact", str(records)]) == 2
    assert f"{records}:1: expected a JSON object, got list" in capsys.readouterr().err


def test_score_cli_invalid_pattern_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = _write(tmp_path / "r.jsonl", [json.dumps({"output": "x"})])
    assert main(["score", "--evaluator", "regex", "--option", "pattern=[", str(records)]) == 2
    assert "not a valid regular expression" in capsys.readouterr().err
