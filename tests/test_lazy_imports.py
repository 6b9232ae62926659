"""`import evret_core`, `evret --help` and `evret plugins` load neither numpy, pydantic nor asyncio; the public
names still resolve (lazily, through the package's module __getattr__)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import evret_core

from .conftest import REPO

HEAVY = ("numpy", "pydantic", "asyncio")

PROBE = """
import json, sys
{body}
print(json.dumps(sorted(m for m in sys.modules if m.partition(".")[0] in {heavy!r})), file=sys.stderr)
"""


def _imported(body: str) -> tuple[list[str], set[str]]:
    """Run ``body`` under ``python -X importtime``: the heavy modules left in sys.modules and those importtime saw."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVRET_")}
    # the built-ins only: a third-party plugin's own imports are its business (docs/writing-a-plugin.md)
    env["EVRET_LOAD_PLUGINS"] = ""
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", PROBE.format(body=body, heavy=HEAVY)],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stderr.splitlines()
    timed = {line.rsplit("|", 1)[-1].strip() for line in lines if line.startswith("import time:")}
    return json.loads(lines[-1]), {m for m in timed if m.partition(".")[0] in HEAVY}


@pytest.mark.parametrize("body", [
    "import evret_core",
    "from evret_core.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass",
    "from evret_core.cli import main\nmain(['plugins', '--all'])",
    "from evret_core.cli import main\nmain(['plugins', '--json', '--all'])",
])
def test_listing_and_help_import_nothing_heavy(body: str) -> None:
    in_modules, timed = _imported(body)
    assert in_modules == [] and timed == set()


def test_the_probe_sees_heavy_imports() -> None:
    in_modules, timed = _imported("from evret_core import create_metric\ncreate_metric('ndcg@10')")
    assert "numpy" in in_modules and "numpy" in timed


def test_public_names_resolve_lazily() -> None:
    from evret_core.judges.llm import LLMJudge

    assert evret_core.LLMJudge is LLMJudge
    assert set(evret_core.__all__) <= set(dir(evret_core))
    for name in evret_core.__all__:
        assert getattr(evret_core, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        evret_core.nope  # noqa: B018
