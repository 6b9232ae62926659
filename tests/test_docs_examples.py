"""Python examples of docs/ pages run as written (newcomer problem 47): each in a temporary folder holding a copy of
the bundled example, so it makes its own inputs and writes nothing into the checkout; where the page shows what the
example prints, the output is compared with it."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO

# (page, section heading, {file the example writes: strings it holds}): the sections whose first Python block is a
# complete program
EXAMPLES = [
    ("docs/results.md", "Comparisons and reports in Python",
     {"report.md": ["titles only", "titles and text", "| recall@5 |", "| mrr@10 |"],
      "report.html": ["titles", "full", "mrr@10"]}),
    ("docs/tracking.md", "Logging from Python", {}),
]


def section(page: str, heading: str) -> str:
    text = (REPO / page).read_text(encoding="utf-8")
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, flags=re.DOTALL | re.MULTILINE)
    assert match, f"{page} has no section {heading!r}"
    return match.group(1)


def run_example(page: str, heading: str, cwd: Path) -> tuple[subprocess.CompletedProcess[str], str | None]:
    """Runs the section's first Python block in ``cwd`` (with ``examples/`` copied in); returns the process and the
    output the page shows (the first ``text`` block after the code), if any."""
    body = section(page, heading)
    code = re.search(r"```python\n(.*?)```", body, flags=re.DOTALL)
    assert code, f"{page} § {heading} has no Python block"
    shown = re.search(r"```text\n(.*?)```", body[code.end():], flags=re.DOTALL)
    shutil.copytree(REPO / "examples", cwd / "examples")
    proc = subprocess.run([sys.executable, "-W", "error", "-c", code.group(1)], cwd=cwd, capture_output=True, text=True, timeout=300)
    return proc, shown.group(1) if shown else None


@pytest.mark.parametrize(("page", "heading", "writes"), EXAMPLES)
def test_doc_example_runs_as_written(page: str, heading: str, writes: dict[str, list[str]], tmp_path: Path) -> None:
    pytest.importorskip("evret_bm25", reason="the examples use evret-bm25 (make demo installs it)")
    if page == "docs/tracking.md":
        pytest.importorskip("mlflow", reason="the example logs to MLflow (the extra evret-core[mlflow])")
    proc, shown = run_example(page, heading, tmp_path)
    assert proc.returncode == 0, proc.stderr
    if shown is not None:
        assert proc.stdout == shown
    for name, needles in writes.items():
        text = (tmp_path / name).read_text(encoding="utf-8")
        assert all(needle in text for needle in needles), (name, needles)
