"""``evret compare`` and ``evret report`` on real SciFact runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import scipy.stats

from evret_core.cli import main
from evret_core.results.evaluation import EvaluationResults
from evret_core.statistics.inference import holm_bonferroni


def evret(*args: str) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).parent / "evret"
    return subprocess.run([str(script), *args], capture_output=True, text=True, timeout=300)


def test_compare_json_lists_delta_p_and_adjusted_p(run_files, id_runs, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["compare", str(run_files["titles"]), str(run_files["full"]), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["test"] == "t" and data["runs"] == ["titles", "full"]
    rows = data["comparisons"]
    assert [r["metric"] for r in rows] == ["ndcg@10", "recall@10", "mrr@10"]
    a, b = id_runs["titles"], id_runs["full"]
    for row in rows:
        m = row["metric"]
        assert {"delta", "p_value", "p_adjusted", "test"} <= set(row)
        assert row["delta"] == pytest.approx(b.scores[m] - a.scores[m])
        x = [a.per_query[q].scores[m] for q in a.per_query]
        y = [b.per_query[q].scores[m] for q in a.per_query]
        assert row["p_value"] == pytest.approx(scipy.stats.ttest_rel(y, x).pvalue, rel=1e-10)
    assert [r["p_adjusted"] for r in rows] == pytest.approx(holm_bonferroni([r["p_value"] for r in rows]))
    # full text retrieves SciFact's abstracts far better than titles alone
    assert rows[0]["delta"] > 0 and rows[0]["significant"] is True


@pytest.mark.parametrize("test", ["randomization", "bootstrap"])
def test_compare_table_marks_significant_differences(run_files, test, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["compare", str(run_files["titles"]), str(run_files["full"]), "--test", test,
                 "--n-resamples", "2000"]) == 0
    out = capsys.readouterr().out
    assert f"{test} test, Holm-Bonferroni over 3 comparisons" in out
    line = next(line for line in out.splitlines() if line.startswith("ndcg@10") and "full vs titles" in line)
    assert line.endswith(" *")
    assert "[" in out.splitlines()[1]  # means shown with intervals


def test_compare_same_run_twice_is_not_significant(run_files, tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    copy = tmp_path / "again.json"
    copy.write_text(Path(run_files["full"]).read_text())
    assert main(["compare", str(run_files["full"]), str(copy), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["comparisons"]
    assert all(r["delta"] == 0 and r["p_value"] == 1.0 and not r["significant"] for r in rows)


def test_compare_mismatched_queries_fails_clearly_or_intersects(run_files, tmp_path) -> None:  # type: ignore[no-untyped-def]
    data = json.loads(Path(run_files["full"]).read_text())
    dropped = list(data["per_query"])[:5]
    for q in dropped:
        del data["per_query"][q]
    for metric in data["scores"]:  # as a run over fewer queries writes them (a stale mean is refused on reading)
        values = [q["scores"][metric] for q in data["per_query"].values()]
        data["scores"][metric] = sum(values) / len(values)
    data["slices"] = {}  # stale slices (of the queries dropped too) are refused on reading as well
    fewer = tmp_path / "fewer.json"
    fewer.write_text(json.dumps(data))
    failed = evret("compare", str(run_files["titles"]), str(fewer))
    assert failed.returncode == 2 and "Traceback" not in failed.stderr
    assert "do not score the same queries" in failed.stderr and dropped[0] in failed.stderr
    ok = evret("compare", str(run_files["titles"]), str(fewer), "--intersection", "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["num_queries"] == len(data["per_query"])
    assert "WARNING: compared on the" in ok.stderr


def test_compare_needs_two_files_and_real_files(run_files, tmp_path) -> None:  # type: ignore[no-untyped-def]
    one = evret("compare", str(run_files["full"]))
    assert one.returncode == 2 and "at least two results files" in one.stderr
    missing = evret("compare", str(run_files["full"]), str(tmp_path / "nope.json"))
    assert missing.returncode == 2 and "nope.json: no such results file" in missing.stderr


def test_report_markdown_and_latex(run_files, id_runs, tmp_path) -> None:  # type: ignore[no-untyped-def]
    md = tmp_path / "r.md"
    assert main(["report", str(run_files["titles"]), str(run_files["full"]), "--format", "markdown",
                 "--output", str(md)]) == 0
    text = md.read_text()
    r = id_runs["full"]
    lo, hi = r.intervals["ndcg@10"]
    assert f"{r.scores['ndcg@10']:.3f} [{lo:.3f}, {hi:.3f}]" in text
    assert "## Comparison" in text and "| ndcg@10 | full vs titles | **+" in text
    assert "## Slices of full by length" in text
    tex = tmp_path / "r.tex"
    assert main(["report", str(run_files["titles"]), str(run_files["full"]), "--format", "latex",
                 "--output", str(tex)]) == 0
    latex = tex.read_text()
    assert latex.startswith("\\documentclass{article}") and latex.rstrip().endswith("\\end{document}")
    assert "ndcg@10 & " in latex and "\\textbf{+" in latex and "recall@10" in latex
    assert latex.count("\\begin{tabular}") == latex.count("\\end{tabular}") >= 3


def test_report_escapes_latex_and_markdown_specials(id_runs, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from evret_core.report import build_report_data, render_report

    r = id_runs["titles"].model_copy(deep=True)
    qid = next(iter(r.per_query))
    r.per_query[qid].tags = {"a_b": "x|y & 50%"}
    r.slices = {"a_b": {"x|y & 50%": next(iter(r.slices["length"].values()))}}
    data = build_report_data({"run_1": r})
    assert "x\\|y & 50%" in render_report(data, "markdown")
    latex = render_report(data, "latex")
    assert "x\\textbar{}y \\& 50\\%" in latex and "run\\_1 by a\\_b" in latex  # "|" would print a dash


def test_report_unknown_format_and_bad_output(run_files, tmp_path) -> None:  # type: ignore[no-untyped-def]
    bad = evret("report", str(run_files["full"]), "--format", "pdf")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr
    nodir = evret("report", str(run_files["full"]), "--output", str(tmp_path / "no" / "r.md"))
    assert nodir.returncode == 2 and "does not exist" in nodir.stderr


def test_results_file_loads_in_report(run_files) -> None:  # type: ignore[no-untyped-def]
    assert EvaluationResults.from_json(run_files["full"]).manifest is not None
