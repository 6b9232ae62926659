"""The plugin system: discovery, isolation of broken plugins, allow/block lists, duplicates, install hints."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evret_core import EvretError, PluginError, UnknownNameError, create_judge, list_plugins
from evret_core.plugins.loading import KNOWN_DISTRIBUTIONS, get_registry, reset_registry

from .._helpers import FakePlugin
from .._paths import REPO

GOOD = """
from evret_core import hookimpl
from evret_core.judge import ExactJudge

class ShoutJudge(ExactJudge):
    name = "shout"

@hookimpl
def register_judges(register):
    register("shout", ShoutJudge)
"""

BROKEN_ON_IMPORT = """
raise RuntimeError("this plugin is broken on purpose")
"""


def run_cli(*args: str, pythonpath: Path | None = None, env: dict[str, str] | None = None,
            cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("EVRET_")}
    if pythonpath is not None:
        # the plugin's folder, then this checkout's evret_core (not whichever one is installed)
        kept = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        full_env["PYTHONPATH"] = os.pathsep.join([str(pythonpath), str(REPO), *kept])
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "evret_core.cli", *args], capture_output=True, text=True,
                          env=full_env, cwd=cwd or REPO, timeout=120)


# -- a real third-party package, built and installed into a temporary virtual environment ----------------------
@pytest.fixture(scope="module")
def keywords_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The interpreter of a temporary venv with evret-judge-keywords installed; the running interpreter's
    packages (evret-core's dependencies, the plugins) are visible underneath it, never modified."""
    root = tmp_path_factory.mktemp("venv")
    source = root / "evret-judge-keywords"
    shutil.copytree(REPO / "docs" / "examples" / "evret-judge-keywords", source)  # builds write into the tree
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    parents = [p for p in sys.path if p.endswith("site-packages")]
    (Path(purelib) / "_evret_parent_env.pth").write_text(
        "import site; " + "; ".join(f"site.addsitedir({p!r})" for p in parents) + "\n", encoding="utf-8"
    )
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                           "--no-build-isolation", "--no-deps", str(source)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return python


def _in_venv(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVRET_")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    return subprocess.run([str(python), *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=300)


def test_the_package_is_not_installed_into_this_interpreter(keywords_python: Path) -> None:
    assert not _installed("evret-judge-keywords")
    assert _in_venv(keywords_python, "-c", "import evret_judge_keywords").returncode == 0


def test_installed_package_judge_by_name_from_python(keywords_python: Path) -> None:
    script = """
import json
from evret_core import JudgmentContext, create_judge, list_plugins
judge = create_judge("keywords", min_fraction=0.5)
# keywords (4+ letters): queens, eggs, daily; found: queens, eggs
verdict = judge.judge(JudgmentContext(query="q", expected_text="queens lay eggs daily",
                                      retrieved_text="the queens lay eggs"))
info = {p.name: p for p in list_plugins()}["evret-judge-keywords"]
print(json.dumps([type(judge).__module__, verdict, info.version, info.registers, info.error,
                  info.distribution]))
"""
    proc = _in_venv(keywords_python, "-c", script)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == ["evret_judge_keywords", True, "0.1.0", {"judge": ["keywords"]}, None,
                                       "evret-judge-keywords"]


def test_installed_package_judge_from_the_cli(keywords_python: Path, tmp_path: Path) -> None:
    dataset = tmp_path / "d.jsonl"
    dataset.write_text(json.dumps({"query_id": "q1", "query": "eggs", "expected_answers": ["queens lay eggs"]}) + "\n")
    listed = _in_venv(keywords_python, "-m", "evret_core.cli", "plugins", "--json")
    assert "evret-judge-keywords" in listed.stdout, listed.stderr
    proc = _in_venv(keywords_python, "-m", "evret_core.cli", "evaluate", "--dataset", str(dataset),
                    "--retriever", "bm25", "--retriever-option", f"corpus={REPO / 'examples' / 'corpus.jsonl'}",
                    "--judge", "keywords", "--judge-option", "min_fraction=0.3", "--metric", "hit_rate@3",
                    "--output", str(tmp_path / "r.json"))
    if "unknown retriever 'bm25'" in proc.stderr:
        pytest.skip("evret-bm25 is not installed")
    assert proc.returncode == 0, proc.stderr
    results = json.loads((tmp_path / "r.json").read_text())
    assert results["config"]["judge"] == {"name": "keywords", "min_fraction": 0.3, "min_length": 4}
    assert results["scores"]["hit_rate@3"] == 1.0


def test_installed_package_passes_its_own_tests(keywords_python: Path) -> None:
    proc = _in_venv(keywords_python, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    str(REPO / "docs" / "examples" / "evret-judge-keywords" / "tests"))
    assert proc.returncode == 0, proc.stdout + proc.stderr


# -- discovery and isolation --------------------------------------------------------------------------------------
def test_fake_plugin_is_discovered(fake_plugin: FakePlugin) -> None:
    fake_plugin("evret-shout", GOOD)
    assert type(create_judge("shout")).__name__ == "ShoutJudge"
    assert get_registry().owner("judge", "shout") == "evret-shout"


def test_plugin_raising_on_import_is_reported_and_the_rest_works(fake_plugin: FakePlugin) -> None:
    fake_plugin("evret-broken", BROKEN_ON_IMPORT)
    site = fake_plugin("evret-shout", GOOD)
    info = {p.name: p for p in list_plugins()}
    assert "this plugin is broken on purpose" in (info["evret-broken"].error or "")
    assert create_judge("shout") is not None and create_judge("exact") is not None
    proc = run_cli("plugins", pythonpath=site)
    assert proc.returncode == 0
    assert "evret-broken" in proc.stdout and "ERROR: import failed: RuntimeError" in proc.stdout
    assert "judges: shout" in proc.stdout
    listed = json.loads(run_cli("plugins", "--json", "--all", pythonpath=site).stdout)
    by_name = {p["name"]: p for p in listed}
    assert by_name["evret-broken"]["error"].startswith("import failed")
    assert by_name["evret-core:judges"]["registers"]["judge"] == [
        "cascade", "contains", "exact", "llm", "regex", "relevance", "repeats", "token-overlap"]


def test_strict_plugins_raise(fake_plugin: FakePlugin, monkeypatch: pytest.MonkeyPatch) -> None:
    site = fake_plugin("evret-broken", BROKEN_ON_IMPORT)
    monkeypatch.setenv("EVRET_STRICT_PLUGINS", "1")
    with pytest.raises(PluginError, match="evret-broken.*failed to import"):
        create_judge("exact")
    proc = run_cli("plugins", pythonpath=site, env={"EVRET_STRICT_PLUGINS": "1"})
    assert proc.returncode == 2 and "evret-broken" in proc.stderr and "Traceback" not in proc.stderr


def test_duplicate_names_error_names_both_plugins(fake_plugin: FakePlugin) -> None:
    fake_plugin("evret-shout", GOOD)
    fake_plugin("evret-shout-two", GOOD)
    with pytest.raises(PluginError, match="'evret-shout' and 'evret-shout-two'"):
        create_judge("shout")
    info = {p.name: p for p in list_plugins()}
    assert "registered by both 'evret-shout' and 'evret-shout-two'" in (info["evret-shout-two"].error or "")


def test_plugin_may_not_take_a_builtin_name(fake_plugin: FakePlugin) -> None:
    fake_plugin("evret-exact", GOOD.replace('register("shout"', 'register("exact"'))
    with pytest.raises(PluginError, match="'evret-core:judges' and 'evret-exact'"):
        create_judge("exact")


def test_allowlist(fake_plugin: FakePlugin, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_plugin("evret-shout", GOOD)
    fake_plugin("evret-broken", BROKEN_ON_IMPORT)
    monkeypatch.setenv("EVRET_LOAD_PLUGINS", "evret-shout")
    reset_registry()
    info = {p.name: p for p in list_plugins()}
    assert info["evret-broken"].skipped == "not in EVRET_LOAD_PLUGINS" and info["evret-broken"].error is None
    assert create_judge("shout") is not None
    monkeypatch.setenv("EVRET_LOAD_PLUGINS", "")
    reset_registry()
    with pytest.raises(UnknownNameError, match="unknown judge 'shout'"):
        create_judge("shout")
    assert create_judge("token-overlap") is not None  # built-ins always load


def test_blocklist(fake_plugin: FakePlugin, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_plugin("evret-shout", GOOD)
    monkeypatch.setenv("EVRET_DISABLE_PLUGINS", "evret-other, evret-shout")
    reset_registry()
    with pytest.raises(UnknownNameError):
        create_judge("shout")
    assert {p.name: p for p in list_plugins()}["evret-shout"].skipped == "disabled by EVRET_DISABLE_PLUGINS"


def test_misspelt_hook_is_caught_by_check_pending(fake_plugin: FakePlugin) -> None:
    fake_plugin("evret-typo", GOOD.replace("def register_judges", "def register_judgez"))
    info = {p.name: p for p in list_plugins()}["evret-typo"]
    assert "register_judgez" in (info.error or "") and info.registers == {}
    with pytest.raises(UnknownNameError):
        create_judge("shout")


def test_failing_register_hook_is_reported(fake_plugin: FakePlugin) -> None:
    fake_plugin("evret-bad-register", GOOD.replace('register("shout", ShoutJudge)', 'register("", ShoutJudge)'))
    info = {p.name: p for p in list_plugins()}["evret-bad-register"]
    assert "name must be a non-empty string" in (info.error or "")


def _installed(dist: str) -> bool:
    import importlib.metadata as md

    try:
        md.distribution(dist)
    except md.PackageNotFoundError:
        return False
    return True


def test_unknown_name_lists_known_names_and_the_distribution_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(KNOWN_DISTRIBUTIONS, ("judge", "fancy"), "evret-fancy")
    with pytest.raises(UnknownNameError) as err:
        create_judge("fancy")
    message = str(err.value)
    assert message.startswith("unknown judge 'fancy'; known judges: cascade, contains, exact, ")
    assert "token-overlap" in message and message.endswith(
        "Install it from a checkout of Evret: pip install plugins/evret-fancy (the plugins are not on PyPI)")
    with pytest.raises(UnknownNameError, match="unknown judge 'nope'; known judges: cascade, contains, exact") as err2:
        create_judge("nope")
    assert "pip install" not in str(err2.value)


def test_semantic_without_its_plugin_names_the_distribution() -> None:
    reset_registry()
    registry = get_registry()
    registry.ensure_loaded()
    if _installed("evret-sentence-transformers"):  # make test installs every plugin: take this one out again
        registry._tables["judge"].pop("semantic", None)
        registry.plugins.pop("evret-sentence-transformers", None)
    try:
        with pytest.raises(UnknownNameError, match="pip install .*plugins/evret-sentence-transformers"):
            create_judge("semantic")
    finally:
        reset_registry()


def test_unknown_name_of_a_skipped_plugin_says_so(fake_plugin: FakePlugin, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_plugin("evret-fancy", GOOD.replace('register("shout"', 'register("fancy"'))
    monkeypatch.setitem(KNOWN_DISTRIBUTIONS, ("judge", "fancy"), "evret-fancy")
    monkeypatch.setenv("EVRET_LOAD_PLUGINS", "")
    reset_registry()
    with pytest.raises(UnknownNameError, match="'evret-fancy' is installed but not in EVRET_LOAD_PLUGINS"):
        create_judge("fancy")


def test_unknown_name_says_when_the_plugin_is_installed_but_broken(
    fake_plugin: FakePlugin, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_plugin("evret-fancy", BROKEN_ON_IMPORT)
    monkeypatch.setitem(KNOWN_DISTRIBUTIONS, ("judge", "fancy"), "evret-fancy")
    with pytest.raises(UnknownNameError, match="'evret-fancy' is installed but failed to load"):
        create_judge("fancy")


def test_bad_factory_options_name_the_accepted_ones() -> None:
    with pytest.raises(EvretError, match="judge 'token-overlap': bad options.*accepted options: min_tokens"):
        create_judge("token-overlap", min_token=3)


def test_plugin_looking_names_up_while_loading_does_not_recurse(fake_plugin: FakePlugin) -> None:
    fake_plugin("evret-eager", GOOD + "\nfrom evret_core import create_judge\nEAGER = create_judge('exact')\n")
    assert create_judge("shout") is not None


def test_builtin_metric_table_matches_the_metrics_module() -> None:
    from evret_core.metrics.ir import ALL_METRICS
    from evret_core.plugins.builtins import FAMILIES

    assert FAMILIES == {family: cls.__name__ for family, cls in ALL_METRICS.items()}
    assert all(type(create_judge(name)).__name__ == cls for name, cls in
               [("exact", "ExactJudge"), ("token-overlap", "TokenOverlapJudge")])


def _builtin_targets() -> list[tuple[str, str, str]]:
    from evret_core.contracts.kinds import KINDS
    from evret_core.plugins.builtins import BUILTIN_PLUGINS

    return [(next(k.name for k in KINDS if hasattr(plugin, k.hook)), name, target)
            for plugin in BUILTIN_PLUGINS for name, target in plugin.factories.items()]


@pytest.mark.parametrize(("kind_name", "name", "target"), _builtin_targets(), ids=lambda v: str(v))
def test_every_builtin_target_resolves_and_is_named(kind_name: str, name: str, target: str, tmp_path: Path) -> None:
    """Each ``lazy("module:Name")`` of plugins/builtins.py imports, is of its kind's base (a subclass, or for a
    protocol a class with every member the protocol declares), and is named as it is registered."""
    from evret_core.contracts.hooks import LazyFactory
    from evret_core.contracts.kinds import kind_named
    from evret_core.testing.suite import NAMED_OTHERWISE

    kind = kind_named(kind_name)
    obj = LazyFactory(target).load()
    if (kind_name, name) == ("retriever", "run"):  # a factory function: what it builds is the retriever
        run = tmp_path / "run.json"
        run.write_text('{"q1": {"d1": 1.0}}', encoding="utf-8")
        obj = obj(path=str(run))
        assert isinstance(obj, kind.base)
    elif getattr(kind.base, "_is_protocol", False):
        members = {m for m, v in vars(kind.base).items() if callable(v) and (not m.startswith("_") or m == "__call__")}
        assert members and all(callable(getattr(obj, m, None)) for m in members), (target, sorted(members))
    else:
        assert isinstance(obj, type) and issubclass(obj, kind.base), f"{target} is not a {kind.base.__name__}"
    own_name = getattr(obj, "family" if kind_name == "metric" else "name", None)
    assert own_name == NAMED_OTHERWISE.get((kind_name, name), name), (target, own_name)


def test_the_exceptions_to_the_naming_rule_are_builtins() -> None:
    from evret_core.testing.suite import NAMED_OTHERWISE

    assert set(NAMED_OTHERWISE) <= {(kind, name) for kind, name, _ in _builtin_targets()}


def test_a_builtin_plugin_shows_pluggy_its_hook_alone() -> None:
    """pluggy looks up, statically, every name ``dir()`` lists on a plugin object: a built-in lists its one hook, not
    the thirty attributes of ``object``, and registers through it."""
    from evret_core.plugins.builtins import BUILTIN_PLUGINS

    for plugin in BUILTIN_PLUGINS:
        (hook,) = dir(plugin)
        assert hook.startswith("register_") and callable(getattr(plugin, hook))
    listed = {info.name: info for info in list_plugins()}
    assert {p.name for p in BUILTIN_PLUGINS} == {n.removeprefix("evret-core:") for n in listed if listed[n].builtin}
    assert all(listed[f"evret-core:{p.name}"].hooks == dir(p) for p in BUILTIN_PLUGINS)
