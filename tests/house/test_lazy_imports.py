"""`import evret_core`, `evret --help` and `evret plugins` load none of numpy, pydantic, asyncio, sqlite3 and pytest;
the public names still resolve (lazily, through the root's module __getattr__). Each installed plugin, and the
example plugin of docs/writing-a-plugin.md (one module: its judge and its hook), is loaded (imported, its hooks
called) without numpy or pydantic, as that page asks, nor asyncio, sqlite3 or pytest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

import evret_core

from .._paths import REPO

HEAVY = ("numpy", "pydantic", "asyncio", "sqlite3", "pytest")

PROBE = """
import json, sys
{body}
print(json.dumps(sorted(m for m in sys.modules if m.partition(".")[0] in {heavy!r})), file=sys.stderr)
"""


def _imported(body: str, plugins: str = "", path: tuple[Path, ...] = ()) -> tuple[list[str], set[str]]:
    """Run ``body`` under ``python -X importtime`` with the built-ins and the third-party ``plugins`` (a
    comma-separated ``EVRET_LOAD_PLUGINS``; a plugin that fails to load raises): the heavy modules left in
    sys.modules and those importtime saw."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVRET_")}
    env["EVRET_LOAD_PLUGINS"] = plugins
    env["EVRET_STRICT_PLUGINS"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([*map(str, path), str(REPO), env.get("PYTHONPATH", "")])
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


def test_the_llm_provider_contract_and_helpers_import_nothing_heavy() -> None:
    """What a provider plugin's module imports (the contract, ``SDKProvider`` and the status helpers) loads neither
    pydantic nor numpy nor asyncio: ``evret_core.llm`` re-exports nothing, so its submodules load alone."""
    in_modules, timed = _imported("from evret_core.contracts.provider import ChatMessage, LLMCallError, "
                                  "LLMProvider, LLMResponse\n"
                                  "from evret_core.llm.providers import SDKProvider, status_error")
    assert in_modules == [] and timed == set()


def test_the_probe_sees_heavy_imports() -> None:
    in_modules, timed = _imported("from evret_core import create_metric\ncreate_metric('ndcg@10')")
    assert "numpy" in in_modules and "numpy" in timed


def test_public_names_resolve_lazily() -> None:
    from evret_core.judge.llm import LLMJudge

    assert evret_core.LLMJudge is LLMJudge
    assert set(evret_core.__all__) <= set(dir(evret_core))
    for name in evret_core.__all__:
        assert getattr(evret_core, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        evret_core.nope  # noqa: B018


PLUGIN_HEAVY = HEAVY
"""What a plugin's module and hooks must not import: numpy and pydantic (docs/writing-a-plugin.md), nor what the
core's light commands never load."""

LIST_ONE = """
from evret_core.plugins.loading import get_registry, list_plugins
info = {{p.name: p for p in list_plugins()}}[{name!r}]
assert info.error is None and info.skipped is None, (info.error, info.skipped)
assert info.registers or info.hooks, 'registered nothing'
"""


def installed_plugins() -> list[str]:
    return sorted({ep.name for ep in entry_points(group="evret")})


def test_every_plugin_of_the_repository_is_installed() -> None:
    # the test below checks the installed plugins: each folder of plugins/ must be one of them
    assert {p.name for p in (REPO / "plugins").iterdir() if p.is_dir()} <= set(installed_plugins())


@pytest.mark.parametrize("plugin", installed_plugins())
def test_loading_an_installed_plugin_imports_neither_numpy_nor_pydantic(plugin: str) -> None:
    in_modules, _ = _imported(LIST_ONE.format(name=plugin), plugins=plugin)
    assert not {m.partition(".")[0] for m in in_modules} & set(PLUGIN_HEAVY), f"{plugin}: {in_modules[:5]}"


def test_loading_the_example_plugin_imports_neither_numpy_nor_pydantic(tmp_path: Path) -> None:
    # installed the way pip would, minus the copying: a dist-info with the example's entry point
    info = tmp_path / "evret_judge_keywords-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: evret-judge-keywords\nVersion: 0.1.0\n",
                                   encoding="utf-8")
    (info / "entry_points.txt").write_text("[evret]\nevret-judge-keywords = evret_judge_keywords\n", encoding="utf-8")
    example = REPO / "docs" / "examples" / "evret-judge-keywords"
    body = LIST_ONE.format(name="evret-judge-keywords") + "assert 'keywords' in get_registry().names('judge')\n"
    in_modules, _ = _imported(body, plugins="evret-judge-keywords", path=(tmp_path, example))
    assert not {m.partition(".")[0] for m in in_modules} & set(PLUGIN_HEAVY), in_modules[:5]


def test_the_example_plugin_is_one_module() -> None:
    package = REPO / "docs" / "examples" / "evret-judge-keywords" / "evret_judge_keywords"
    assert [p.name for p in package.glob("*.py")] == ["__init__.py"]
    source = (package / "__init__.py").read_text(encoding="utf-8")
    assert "class KeywordJudge(Judge):" in source and 'register("keywords", KeywordJudge)' in source
