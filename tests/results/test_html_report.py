"""The HTML report rendered by headless Chromium: no console errors, every section present, text escaped."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from evret_core import EvaluationDataset, Evaluator, QueryExample
from evret_core.cli import main
from evret_core.report import build_report_data, render_report
from evret_core.report.html import SECTIONS

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--enable-logging=stderr", "--v=0"]


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing: .ci/test-setup.sh installs it")
        pytest.skip("chromium is not installed (apt-get install chromium; .ci/test-setup.sh does it)")
    return path


def render(html_file: Path, tmp_path: Path) -> tuple[str, list[str]]:
    """The DOM after the scripts ran, and every console message Chromium logged."""
    profile = tmp_path / f"profile-{html_file.stem}"
    proc = subprocess.run(
        [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom", html_file.resolve().as_uri()],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    return proc.stdout, console


def test_console_check_catches_errors(tmp_path: Path) -> None:
    """The check below is real: a page with a script error and a blocked fetch is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><body><script>missingFunction();</script></body></html>')
    _, console = render(bad, tmp_path)
    assert any("missingFunction is not defined" in line for line in console)


def test_two_run_report_renders_cleanly(run_files, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "report.html"
    assert main(["report", str(run_files["titles"]), str(run_files["full"]), "--format", "html",
                 "--output", str(out)]) == 0
    html = out.read_text()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html), "the report must not load anything"
    dom, console = render(out, tmp_path)
    assert console == [], console
    assert 'data-ready="yes"' in dom  # the report's script ran to its end
    for section in SECTIONS:
        assert f'<section id="{section}"' in dom, section
    curves = re.search(r'<section id="curves".*?</section>', dom, re.S)
    assert curves and curves.group(0).count("<polyline") == 3 * 2  # ndcg, recall, mrr x two runs
    assert 'id="slice-metric"' in dom and "by length" in dom
    comparison = re.search(r'<section id="comparison".*?</section>', dom, re.S)
    assert comparison and "full vs titles" in comparison.group(0) and 'class="num sig' in comparison.group(0)
    queries = re.search(r'<section id="queries".*?</section>', dom, re.S)
    assert queries and queries.group(0).count('<details class="q"') == 300
    assert "of 300 queries" in dom  # the filter script counted them


def test_hostile_texts_are_escaped(tmp_path: Path) -> None:
    hostile = '<script>console.error("xss")</script><img src=x onerror="console.error(1)">&amp; </details>'
    ds = EvaluationDataset(name="hostile", queries=[
        QueryExample(query_id=f"q{i}<b>", query_text=f"what is {hostile} {i}", expected_answers=[f"answer {i} {hostile}"],
                     tags={"kind<i>": "x</section>" if i % 2 else "y"})
        for i in range(6)
    ])

    def retriever(query: str, k: int) -> list[dict[str, object]]:
        i = query.split()[-1]
        return [{"doc_id": f"doc<{i}>", "text": f"answer {i} {hostile}"}, {"doc_id": "z", "text": hostile}]

    results = Evaluator(retriever, ["recall@2", "ndcg@2"], judge="exact", n_resamples=50).evaluate(ds)
    assert results.scores["recall@2"] == 1.0
    page = tmp_path / "hostile.html"
    page.write_text(render_report(build_report_data({"run<1>": results, "run&2": results}), "html"))
    dom, console = render(page, tmp_path)
    assert console == [], console
    assert "<img" not in dom and "<script>console" not in dom
    assert "&lt;script&gt;console.error(\"xss\")&lt;/script&gt;" in dom or "&lt;script&gt;console.error(&quot;xss&quot;)" in dom
    assert dom.count('<section id="') == len(SECTIONS)
    assert 'data-ready="yes"' in dom


def test_single_run_report_has_all_sections(run_files, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "single.html"
    assert main(["report", str(run_files["full"]), "--format", "html", "--output", str(out)]) == 0
    dom, console = render(out, tmp_path)
    assert console == []
    for section in SECTIONS:
        assert f'<section id="{section}"' in dom
    assert "One run" in dom
