"""Every plugin under plugins/ has the same layout (issue 25):

- ``pyproject.toml``: the project named as its folder, with an ``evret`` entry point of that name whose module is
  in the plugin's package;
- the package ``evret_<name>/`` (``evret-google-genai`` -> ``evret_google_genai``) holding that plugin module;
- ``README.md``: titled with the plugin's name, saying how to install it (``pip install``) and naming, in backticks,
  every name the plugin registers;
- ``tests/``: test modules in which, for every kind the plugin registers, a class subclasses that kind's
  conformance suite from :mod:`evret_core.testing` (found with ``ast``, nothing imported);
- its section in the root README: a row of the "What to install" table naming the plugin.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

from evret_core.plugins.loading import list_plugins

from .._paths import REPO

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PLUGINS = sorted(p for p in (REPO / "plugins").iterdir() if p.is_dir() and not p.name.startswith((".", "_")))

SUITE_OF_KIND = {
    "judge": "JudgeConformance",
    "retriever": "RetrieverConformance",
    "llm_provider": "ProviderConformance",
    "metric": "MetricConformance",
    "evaluator": "OutputEvaluatorConformance",
    "retrieval_evaluator": "RetrievalEvaluatorConformance",
    "generator": "GeneratorConformance",
    "perturbation": "PerturbationConformance",
    "executor": "ExecutorConformance",
    "reranker": "RerankerConformance",
    "rewriter": "RewriterConformance",
}
"""The conformance suite a plugin subclasses for each kind it registers."""
ALSO_ACCEPTED = {"InProcessProviderConformance": "ProviderConformance"}
"""Suites that stand for the kind's suite: a provider running a model in process has no server or key to test."""


def entry_point(plugin: Path) -> tuple[str, str]:
    """The plugin's ``evret`` entry point: (name, module)."""
    project = tomllib.loads((plugin / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["name"] == plugin.name, f"{plugin.name}: pyproject names another project"
    entries = project["project"].get("entry-points", {}).get("evret", {})
    assert list(entries) == [plugin.name], f"{plugin.name}: one `evret` entry point named {plugin.name} expected"
    return plugin.name, entries[plugin.name]


def registered(plugin: Path) -> dict[str, list[str]]:
    info = {p.name: p for p in list_plugins()}.get(plugin.name)
    assert info is not None and info.error is None, f"{plugin.name} is not installed or fails to load"
    return info.registers


def subclassed_suites(tests: Path) -> set[str]:
    """The conformance suites of :mod:`evret_core.testing` that classes of the test modules subclass."""
    found: set[str] = set()
    for module in tests.glob("test_*.py"):
        tree = ast.parse(module.read_text(encoding="utf-8"))
        imported: dict[str, str] = {}  # local name -> suite
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("evret_core.testing"):
                for alias in node.names:
                    if alias.name.endswith("Conformance"):
                        imported[alias.asname or alias.name] = alias.name
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
                found |= {imported[b.id] for b in node.bases if isinstance(b, ast.Name) and b.id in imported}
    return found


def test_there_are_plugins() -> None:
    assert len(PLUGINS) >= 10


def test_every_suite_is_in_the_testing_kit() -> None:
    import evret_core.testing as kit

    assert set(SUITE_OF_KIND.values()) | set(ALSO_ACCEPTED) <= set(kit.__all__)


@pytest.mark.parametrize("plugin", PLUGINS, ids=lambda p: p.name)
def test_pyproject_package_and_plugin_module(plugin: Path) -> None:
    _, module = entry_point(plugin)
    package = plugin / plugin.name.replace("-", "_")
    assert (package / "__init__.py").is_file(), f"{plugin.name}: no package {package.name}/"
    assert module.split(":")[0].split(".")[0] == package.name, f"{plugin.name}: entry point {module} is outside it"
    path = plugin / (module.split(":")[0].replace(".", "/") + ".py")
    assert path.is_file() or (path.with_suffix("") / "__init__.py").is_file(), f"{plugin.name}: no module {module}"


@pytest.mark.parametrize("plugin", PLUGINS, ids=lambda p: p.name)
def test_readme_names_the_plugin_its_install_and_what_it_registers(plugin: Path) -> None:
    readme = (plugin / "README.md").read_text(encoding="utf-8")
    assert readme.startswith(f"# {plugin.name}\n"), f"{plugin.name}: README.md must start with '# {plugin.name}'"
    assert re.search(rf"pip install [^\n]*{re.escape(plugin.name)}\b", readme), \
        f"{plugin.name}: README.md does not say how to install it (pip install ... {plugin.name})"
    for kind, names in registered(plugin).items():
        for name in names:
            assert f"`{name}`" in readme, f"{plugin.name}: README.md does not name its {kind} `{name}`"


@pytest.mark.parametrize("plugin", PLUGINS, ids=lambda p: p.name)
def test_tests_subclass_the_suite_of_every_kind_registered(plugin: Path) -> None:
    suites = subclassed_suites(plugin / "tests")
    suites |= {ALSO_ACCEPTED[s] for s in suites if s in ALSO_ACCEPTED}
    assert suites, f"{plugin.name}: no test class subclasses a conformance suite of evret_core.testing"
    for kind in registered(plugin):
        assert SUITE_OF_KIND[kind] in suites, f"{plugin.name} registers a {kind}: subclass {SUITE_OF_KIND[kind]}"


@pytest.mark.parametrize("plugin", PLUGINS, ids=lambda p: p.name)
def test_root_readme_what_to_install_has_a_row(plugin: Path) -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## What to install", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    assert any(re.search(rf"\b{re.escape(plugin.name)}\b", row.split("|")[1]) for row in rows[2:]), \
        f"README.md's 'What to install' table has no row for {plugin.name}"


def test_the_suite_detector_sees_only_subclasses_of_the_kit(tmp_path: Path) -> None:
    (tmp_path / "test_x.py").write_text(
        "from evret_core.testing import JudgeConformance as Base\n"
        "from mine import RetrieverConformance\n"
        "class TestA(Base):\n    pass\n"
        "class TestB(RetrieverConformance):\n    pass\n", encoding="utf-8")
    assert subclassed_suites(tmp_path) == {"JudgeConformance"}


def test_no_install_line_names_a_distribution_that_is_not_on_the_package_index() -> None:
    """evret-core and its plugins are installed from a checkout: a line that says ``pip install evret-lancedb`` or
    ``pip install 'evret-core[mlflow]'`` fails on a user's machine (no such distribution on PyPI) and invites
    someone else to register the name. Every README, doc page, docstring and error hint says how to install
    from this repository instead."""
    files = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md")), *sorted(REPO.glob("plugins/*/README.md")),
             *sorted((REPO / "evret_core").rglob("*.py")), *sorted(REPO.glob("plugins/*/evret_*/**/*.py"))]
    wrong = re.compile(r"pip install\s+['\"]?evret-[a-z-]+(\[[a-z,]+\])?['\"]?(?![\w/.-])")
    found = [f"{path.relative_to(REPO)}:{n}: {line.strip()}" for path in files
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if wrong.search(line)]
    assert not found, "\n".join(found)
