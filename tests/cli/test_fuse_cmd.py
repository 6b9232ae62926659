"""``evret fuse`` (evret_core/cli/fuse_cmd.py, issue 37): TREC run files fused into a TREC run whose scores equal
ranx 0.3.21's ``fuse`` on the same runs (to 1e-9) for every method, every normalisation, rrf's k, weights and a
depth; bad files and bad options are one line and exit 2 before anything is written."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

from evret_core.cli import main
from evret_core.io.trec import ranked_docs, read_run, write_run
from evret_core.retrieve.fusion import METHODS, NORMS

from .._helpers import one_error
from ..retrieve.test_fusion import assert_same, random_run

ranx = pytest.importorskip("ranx")


def ranx_fuse(runs: list[dict[str, dict[str, float]]], method: str, norm: str,
              params: dict[str, Any]) -> dict[str, dict[str, float]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numba's type-safety warnings inside ranx
        fused = ranx.fuse([ranx.Run(r) for r in runs], norm=None if norm == "none" else norm, method=method,
                          params=params)
    return {q: dict(d) for q, d in fused.to_dict().items()}


@pytest.fixture
def run_files(tmp_path: Path) -> tuple[list[dict[str, dict[str, float]]], list[str]]:
    """Two runs of the same 40 queries (ranx needs equal query sets), up to 12 documents each (ranx orders ties
    stably up to 15), integer scores (many ties), written as TREC files."""
    runs = [random_run(seed, 40, 12, ties=True) for seed in (11, 12)]
    paths = []
    for i, run in enumerate(runs):
        path = tmp_path / f"run{i}.trec"
        write_run(path, run, tag=f"r{i}")
        paths.append(str(path))
    assert set(runs[0]) == set(runs[1])
    return runs, paths


def fused_file(path: Path) -> dict[str, dict[str, float]]:
    fused = read_run(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    # the file is in trec_eval's order with ranks 1, 2, ... per query, and the tag given
    assert [line.split()[2] for line in lines] == [doc for q in fused for doc in ranked_docs(fused[q])]
    assert all(line.split()[5] == "evret-fuse" for line in lines)
    return fused


@pytest.mark.parametrize(("method", "norm"), [(m, "min-max") for m in METHODS] + [("sum", n) for n in NORMS]
                         + [("mnz", "zmuv"), ("max", "rank")])
def test_the_fused_file_equals_ranx(run_files: Any, tmp_path: Path, method: str, norm: str) -> None:
    runs, paths = run_files
    out = tmp_path / "fused.trec"
    weights = ["--weights", "0.3", "0.7"] if method in ("wsum", "wmnz") else []
    assert main(["fuse", *paths, "--method", method, "--norm", norm, *weights, "-o", str(out)]) == 0
    params = {"weights": [0.3, 0.7]} if weights else {}
    assert_same(fused_file(out), ranx_fuse(runs, method, norm, params))


def test_rrf_k_and_depth(run_files: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs, paths = run_files
    out = tmp_path / "fused.trec"
    assert main(["fuse", *paths, "--rrf-k", "10", "-o", str(out)]) == 0
    assert_same(fused_file(out), ranx_fuse(runs, "rrf", "min-max", {"k": 10}))
    assert "fused 2 runs (rrf): 40 queries" in capsys.readouterr().err
    assert main(["fuse", *paths, "--method", "sum", "--depth", "5", "-o", str(out)]) == 0
    tops = [{q: {d: s[d] for d in ranked_docs(s)[:5]} for q, s in run.items()} for run in runs]
    assert_same(fused_file(out), ranx_fuse(tops, "sum", "min-max", {}))


def test_standard_output(run_files: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, paths = run_files
    out = tmp_path / "fused.trec"
    assert main(["fuse", *paths, "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["fuse", *paths, "-o", "-"]) == 0
    captured = capsys.readouterr()
    assert captured.out == out.read_text(encoding="utf-8") and "standard output" in captured.err


def test_a_bad_line_is_named_by_file_and_line_and_nothing_is_written(run_files: Any, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    _, paths = run_files
    bad = tmp_path / "bad.trec"
    bad.write_text("q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 high t\n", encoding="utf-8")
    out = tmp_path / "fused.trec"
    out.write_text("kept\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["fuse", paths[0], str(bad), "-o", str(out)]) == 2
    assert f"{bad}:2" in one_error(capsys)
    assert out.read_text(encoding="utf-8") == "kept\n"
    twice = tmp_path / "twice.trec"
    twice.write_text("q1 Q0 d1 1 2.0 t\nq1 Q0 d1 2 1.0 t\n", encoding="utf-8")
    assert main(["fuse", paths[0], str(twice), "-o", str(tmp_path / "new.trec")]) == 2
    assert "d1" in one_error(capsys) and not (tmp_path / "new.trec").exists()


@pytest.mark.parametrize(("extra", "message"), [
    (["--weights", "1", "2"], "option weights is only used by method wsum or wmnz"),
    (["--method", "wsum", "--weights", "1"], "option weights has 1 values for 2 retrievers"),
    (["--rrf-k", "-1"], "option rrf_k must be a number >= 0"),
    (["--depth", "0"], "option --depth must be an integer from 1"),
    (["--tag", "a b"], "option --tag must be a non-empty word"),
])
def test_bad_options_are_one_line_before_reading(run_files: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 extra: list[str], message: str) -> None:
    _, paths = run_files
    out = tmp_path / "fused.trec"
    capsys.readouterr()
    assert main(["fuse", *paths, *extra, "-o", str(out)]) == 2
    assert message in one_error(capsys) and not out.exists()


def test_the_commands_choices_are_the_fusion_modules_names() -> None:
    from evret_core.cli.fuse_cmd import METHOD_NAMES, NORM_NAMES

    assert list(METHOD_NAMES) == list(METHODS) and list(NORM_NAMES) == list(NORMS)


def test_one_run_is_not_a_fusion(run_files: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, paths = run_files
    capsys.readouterr()
    assert main(["fuse", paths[0], "-o", str(tmp_path / "x.trec")]) == 2
    assert "at least two run files" in one_error(capsys)


def test_the_output_may_not_be_an_input(run_files: Any, capsys: pytest.CaptureFixture[str]) -> None:
    _, paths = run_files
    before = Path(paths[1]).read_bytes()
    capsys.readouterr()
    assert main(["fuse", *paths, "-o", paths[1]]) == 2
    assert "is also an input of this run" in one_error(capsys)
    assert Path(paths[1]).read_bytes() == before
