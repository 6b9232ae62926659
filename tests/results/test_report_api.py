"""The Python API of comparisons and reports (evret_core.compare / report_data / make_report / write_report);
the example of docs/results.md runs in tests/docs/test_docs_examples.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import evret_core
from evret_core import Comparison, EvaluationResults, EvretError, PairComparison
from evret_core.cli import main


def test_compare_takes_results_files_or_named_runs(id_runs: dict[str, EvaluationResults],
                                                    run_files: dict[str, Path]) -> None:
    by_file = evret_core.compare(run_files["titles"], str(run_files["full"]))
    assert isinstance(by_file, Comparison) and by_file.runs == ["titles", "full"]
    assert all(isinstance(p, PairComparison) for p in by_file.pairs)
    assert [p.metric for p in by_file.pairs] == ["ndcg@10", "recall@10", "mrr@10"]
    full, titles = id_runs["full"], id_runs["titles"]
    ndcg = by_file.pairs[0]
    assert ndcg.a == "titles" and ndcg.b == "full" and ndcg.n == titles.num_queries
    assert ndcg.delta == pytest.approx(full.scores["ndcg@10"] - titles.scores["ndcg@10"])
    named = evret_core.compare({"A": titles, "B": run_files["full"]}, test="randomization", n_resamples=500, seed=3)
    assert named.runs == ["A", "B"] and named.test == "randomization"
    assert named.pairs[0].delta == pytest.approx(ndcg.delta)
    assert evret_core.compare(titles, full).runs == ["run1", "run2"]


def test_the_cli_prints_what_the_api_returns(run_files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", str(run_files["titles"]), str(run_files["full"]), "--json", "--seed", "2"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == evret_core.compare(run_files["titles"], run_files["full"], seed=2).to_dict()
    out = Path(str(run_files["titles"]) + ".md")
    assert main(["report", str(run_files["titles"]), str(run_files["full"]), "--output", str(out)]) == 0
    assert out.read_text() == evret_core.make_report(run_files["titles"], run_files["full"], format="markdown")


def test_bad_calls_are_evret_errors(id_runs: dict[str, EvaluationResults], tmp_path: Path) -> None:
    titles = id_runs["titles"]
    with pytest.raises(EvretError, match="at least two runs"):
        evret_core.compare(titles)
    with pytest.raises(EvretError, match="one mapping"):
        evret_core.compare({"a": titles}, titles)
    with pytest.raises(EvretError, match="expected EvaluationResults or a results file path, got int"):
        evret_core.compare(titles, 3)  # type: ignore[arg-type]
    with pytest.raises(EvretError, match="non-empty strings"):
        evret_core.make_report({"": titles})
    with pytest.raises(EvretError, match="unknown report format 'pdf'"):
        evret_core.make_report(titles, format="pdf")
    with pytest.raises(EvretError, match="max_k must be a positive integer"):
        evret_core.make_report(titles, max_k=0)
    with pytest.raises(EvretError, match="cannot tell the report format"):
        evret_core.write_report(tmp_path / "report.pdf", titles)
    with pytest.raises(EvretError, match="does not exist"):
        evret_core.write_report(tmp_path / "missing" / "report.html", titles)
    with pytest.raises(EvretError, match="not-there.json"):
        evret_core.compare(titles, tmp_path / "not-there.json")


def test_report_data_is_computed_once_for_every_format(id_runs: dict[str, EvaluationResults]) -> None:
    data = evret_core.report_data(id_runs, max_k=5)
    assert data.names == ["titles", "full"] and data.comparison is not None
    assert all(len(curve) == 5 for curves in data.curves.values() for curve in curves.values())
    assert evret_core.make_report(data, format="markdown") == evret_core.make_report(id_runs, format="markdown",
                                                                                     max_k=5)
    latex = evret_core.make_report(data, format="latex")
    assert latex.startswith("\\documentclass") and "titles" in latex
    with pytest.raises(EvretError, match="rendered alone"):
        evret_core.make_report(data, id_runs["titles"])


def test_write_report_picks_the_format_from_the_suffix(id_runs: dict[str, EvaluationResults], tmp_path: Path) -> None:
    for name, start in (("r.html", "<!DOCTYPE html>"), ("r.md", "# Evret report"), ("r.tex", "\\documentclass")):
        path = evret_core.write_report(tmp_path / name, id_runs)
        assert path == tmp_path / name and path.read_text(encoding="utf-8").startswith(start)
    forced = evret_core.write_report(tmp_path / "r.txt", id_runs, format="markdown")
    assert forced.read_text(encoding="utf-8").startswith("# Evret report")


def test_markdown_and_latex_reports_survive_lone_surrogates(id_runs: dict[str, EvaluationResults],
                                                           tmp_path: Path) -> None:
    titles = id_runs["titles"].model_copy(deep=True)
    titles.slices = {tag + "\ud800": {value + "\udfff|<b>": sl for value, sl in values.items()}
                     for tag, values in titles.slices.items()}
    for name in ("r.md", "r.tex"):
        text = evret_core.write_report(tmp_path / name, {"run\ud800": titles}).read_text(encoding="utf-8")
        assert "\ud800" not in text  # written as a visible escape (evret_core.contracts.errors.visible)
    markdown = (tmp_path / "r.md").read_text(encoding="utf-8")
    assert "\\\\udfff\\|&lt;b&gt;" in markdown  # pipes and brackets still escaped next to the escape
    assert "\\textbackslash{}udfff\\textbar{}\\textless{}b\\textgreater{}" in (tmp_path / "r.tex").read_text(
        encoding="utf-8")
