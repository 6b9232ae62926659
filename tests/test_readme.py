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


@pytest.mark.parametrize("command", commands())
def test_readme_command(command: str) -> None:
    argv = shlex.split(command)
    try:
        proc = subprocess.run([sys.executable, "-m", "evret_core.cli", *argv[1:]], cwd=REPO, capture_output=True,
                              text=True, timeout=300)
    finally:
        (REPO / "results.json").unlink(missing_ok=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip()


def test_readme_python() -> None:
    (block,) = re.findall(r"```python\n(.*?)```", README, flags=re.DOTALL)
    proc = subprocess.run([sys.executable, "-c", block], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "'recall@5'" in proc.stdout
