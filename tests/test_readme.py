"""The README walk-through works verbatim: its `evret` commands and its Python block run as written."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

import pytest

from .conftest import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")


@pytest.fixture(autouse=True)
def needs_bm25() -> None:
    pytest.importorskip("evret_bm25", reason="the walk-through uses evret-bm25 (make demo installs it)")


def commands() -> list[str]:
    blocks = re.findall(r"```bash\n(.*?)```", README, flags=re.DOTALL)
    return [line for block in blocks for line in block.splitlines() if line.startswith("evret ")]


def test_the_walk_through_has_commands() -> None:
    assert len(commands()) >= 3


@pytest.fixture(scope="module")
def ran() -> dict[str, subprocess.CompletedProcess[str]]:
    """Every README command, in order, as a user types them (later ones read what earlier ones wrote); the files
    they write into the checkout are removed afterwards."""
    before = set(REPO.iterdir())
    outcomes: dict[str, subprocess.CompletedProcess[str]] = {}
    try:
        for command in commands():
            argv = shlex.split(command)
            outcomes[command] = subprocess.run([sys.executable, "-m", "evret_core.cli", *argv[1:]], cwd=REPO,
                                               capture_output=True, text=True, timeout=300)
    finally:
        for path in set(REPO.iterdir()) - before:
            if path.is_file():
                path.unlink()
    return outcomes


@pytest.mark.parametrize("command", commands())
def test_readme_command(command: str, ran: dict[str, subprocess.CompletedProcess[str]]) -> None:
    proc = ran[command]
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() or proc.stderr.strip()


def test_readme_python() -> None:
    (block,) = re.findall(r"```python\n(.*?)```", README, flags=re.DOTALL)
    proc = subprocess.run([sys.executable, "-c", block], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "'recall@5'" in proc.stdout
