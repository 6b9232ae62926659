"""The README walk-through works verbatim: its `evret` commands and its Python block run as written, print what
the README says they print, and never touch the checkout: they run in a temporary copy of what they read
(``examples/``, with ``../shared`` linked beside it), as a user's own folder would be."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evret_core.testing.shared_data import repo_root, shared_data

from .._paths import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")


@pytest.fixture(autouse=True)
def needs_bm25() -> None:
    pytest.importorskip("evret_bm25", reason="the walk-through uses evret-bm25 (make demo installs it)")


def commands() -> list[str]:
    blocks = re.findall(r"```bash\n(.*?)```", README, flags=re.DOTALL)
    return [line for block in blocks for line in block.splitlines() if line.startswith("evret ")]


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every file in the checkout's root and under examples/: (size, mtime in ns)."""
    files = [p for p in root.iterdir() if p.is_file()] + [p for p in (root / "examples").rglob("*") if p.is_file()]
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in files}


def test_the_walk_through_has_commands() -> None:
    assert len(commands()) >= 3


@pytest.fixture(scope="module")
def walk(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A user's folder: a copy of examples/ in ``<tmp>/evret``, the shared data linked at ``<tmp>/shared``."""
    top = tmp_path_factory.mktemp("walk")
    folder = top / "evret"
    shutil.copytree(REPO / "examples", folder / "examples")
    shared = Path(os.environ.get("EVRET_SHARED") or repo_root().parent / "shared")
    if shared.exists():
        (top / "shared").symlink_to(shared.resolve(), target_is_directory=True)
    return folder


@pytest.fixture(scope="module")
def ran(walk: Path) -> tuple[dict[str, subprocess.CompletedProcess[str]], dict[str, tuple[int, int]],
                             dict[str, tuple[int, int]]]:
    """Every README command, in order, as a user types them (later ones read what earlier ones wrote), in the
    temporary folder; with the checkout's files before and after."""
    before = snapshot(REPO)
    outcomes: dict[str, subprocess.CompletedProcess[str]] = {}
    for command in commands():
        argv = shlex.split(command)
        outcomes[command] = subprocess.run([sys.executable, "-m", "evret_core.cli", *argv[1:]], cwd=walk,
                                           capture_output=True, text=True, timeout=300)
    return outcomes, before, snapshot(REPO)


@pytest.mark.parametrize("command", commands())
def test_readme_command(command: str, ran: tuple[dict[str, subprocess.CompletedProcess[str]], object, object]
                        ) -> None:
    if "../shared/" in command:
        shared_data("datasets", what="the shared datasets the command reads")  # skips outside CI when absent
    proc = ran[0][command]
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() or proc.stderr.strip()


def test_the_walk_through_writes_into_its_own_folder_never_the_checkout(
        walk: Path, ran: tuple[object, dict[str, tuple[int, int]], dict[str, tuple[int, int]]]) -> None:
    _, before, after = ran
    assert after == before  # nothing written, overwritten or deleted in the checkout
    for written in ("results.json", "results-any.json", "report.html", "rag.json"):
        assert (walk / written).is_file(), written


def python_block() -> tuple[str, str]:
    """The README's Python block and the output it says it prints."""
    (block,) = re.findall(r"```python\n(.*?)```", README, flags=re.DOTALL)
    (printed,) = re.findall(r"```python\n.*?```\n\nprints\n\n```text\n(.*?)```", README, flags=re.DOTALL)
    return block, printed


def test_readme_python_prints_what_the_readme_says(walk: Path) -> None:
    block, printed = python_block()
    before = snapshot(REPO)
    proc = subprocess.run([sys.executable, "-c", block], cwd=walk, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == printed
    assert snapshot(REPO) == before


def test_the_readme_numbers_for_the_default_judge_are_true() -> None:
    from evret_core import EvaluationDataset, Evaluator, create_retriever
    from evret_core.judge.resolve import DEFAULT_JUDGE

    said = re.search(r"recall@5 \*\*([0-9.]+)\*\* with `(\S+)` and \*\*([0-9.]+)\*\* with\s+`(\S+)`", README)
    assert said is not None and said.group(2) == DEFAULT_JUDGE
    dataset = EvaluationDataset.from_jsonl(REPO / "examples" / "dataset.jsonl")
    bm25 = create_retriever("bm25", corpus=str(REPO / "examples" / "corpus.jsonl"))
    for value, judge in ((said.group(1), None), (said.group(3), said.group(4))):
        got = Evaluator(bm25, metrics=["recall@5"], judge=judge).evaluate(dataset).scores["recall@5"]
        assert f"{got:.3f}" == value, judge


def test_what_the_walk_through_writes_is_git_ignored() -> None:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    written = sorted({m for c in commands() for m in re.findall(r"--output (\S+)", c)})
    assert {"results.json", "results-any.json", "report.html", "rag.json"} <= set(written)
    proc = subprocess.run(["git", "check-ignore", *written], cwd=REPO, capture_output=True, text=True)
    assert sorted(proc.stdout.split()) == written


def test_what_to_install_names_the_cores_dependencies() -> None:
    import tomllib

    said = re.search(r"installs evret-core alone \(([^)]*)\)", README)
    assert said is not None
    named = {w.lower() for w in re.findall(r"[A-Za-z][\w-]+", said.group(1))} - {"and", "before", "python"}
    required = {re.split(r"[<>=;\[ ]", d)[0].lower()
                for d in tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]}
    assert named == required
