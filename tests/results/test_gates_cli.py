"""Regression gates on the command line: a failed gate exits 1 with one line per metric; bad gate input exits 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from evret_core.cli import main

from .._paths import REPO

RAG_CONFIG = REPO / "examples" / "rag" / "rag.toml"


def _rag(*extra: str) -> list[str]:
    return ["rag", "--config", str(RAG_CONFIG), "--resamples", "20", *extra]


def test_rag_floor_fails_with_exit_1_and_passes_below_the_score(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rag.json"
    assert main(_rag("--output", str(out), "--fail-under", "retrieved/correct=0.999",
                     "--fail-under", "retrieval/recall@1=0")) == 1
    err = capsys.readouterr().err
    assert "FAILED retrieved/correct:" in err and "under the floor 0.999" in err
    assert "recall@1" not in err.split("FAILED")[-1].split("\n")[0]
    assert out.exists()  # the run's results are kept even when a gate fails
    assert main(_rag("--fail-under", "retrieved/correct=0.0")) == 0
    assert "gates passed: retrieved/correct" in capsys.readouterr().err


def test_rag_baseline_gate_flags_a_significantly_worse_generator(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    base = tmp_path / "base.json"
    assert main(_rag("--output", str(base))) == 0
    capsys.readouterr()
    # the same run is no regression
    assert main(_rag("--baseline", str(base))) == 0
    capsys.readouterr()
    # a generator that refuses everything answers none of the 9 answerable questions: significantly worse f1
    worse = main(_rag("--generator-option", "threshold=1", "--baseline", str(base),
                      "--gate-metric", "retrieved/f1", "--gate-test", "t"))
    err = capsys.readouterr().err
    assert worse == 1, err
    assert "FAILED retrieved/f1:" in err and "significantly below the baseline" in err


@pytest.mark.parametrize(("flags", "message"), [
    (["--fail-under", "recall"], "--fail-under 'recall': expected METRIC=VALUE"),
    (["--gate-alpha", "1.5"], "--gate-alpha"),
    (["--min-effect", "-1"], "--min-effect"),
])
def test_bad_gate_options_exit_2_before_any_work(flags: list[str], message: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_rag(*flags)) == 2
    assert message in capsys.readouterr().err


def test_a_missing_baseline_file_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_rag("--baseline", str(tmp_path / "nope.json"))) == 2
    assert "nope.json" in capsys.readouterr().err
