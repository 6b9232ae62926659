"""The plugin SDK: ``evret_core.sdk`` is the one module plugins import from Evret; it is a plain re-export (imports
and ``__all__``, nothing else), every name of it is used by a plugin or a docs example, and importing it costs no
more than loading a plugin may (no numpy, pydantic, asyncio, sqlite3 or pytest)."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from evret_core import PluginError, create_judge, sdk
from evret_core.contracts.hooks import LazyFactory

from .._helpers import FakePlugin
from .._paths import REPO

PLUGIN_SOURCES = sorted(REPO.glob("plugins/*/evret_*/**/*.py"))


def core_imports(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of every import of ``evret_core`` or one of its modules in ``path``, at any depth
    (imports inside functions count)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module]
            if node.module == "evret_core":  # `from evret_core import x`: x may be a module
                modules = [f"evret_core.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        else:
            continue
        found += [(node.lineno, m) for m in modules if m == "evret_core" or m.startswith("evret_core.")]
    return found


def test_plugin_sources_are_found() -> None:
    packages = {p.relative_to(REPO).parts[1] for p in PLUGIN_SOURCES}
    assert len(packages) == len(list(REPO.glob("plugins/*/pyproject.toml"))) >= 10


@pytest.mark.parametrize("path", PLUGIN_SOURCES, ids=lambda p: str(p.relative_to(REPO / "plugins")))
def test_plugins_import_only_the_sdk(path: Path) -> None:
    bad = [f"line {line}: {module}" for line, module in core_imports(path) if module != "evret_core.sdk"]
    assert not bad, f"{path.relative_to(REPO)} imports from evret_core other than evret_core.sdk: {bad}"


def test_the_check_sees_every_form_of_import(tmp_path: Path) -> None:
    source = tmp_path / "x.py"
    source.write_text("import evret_core.io.datasets\nfrom evret_core import assign\ndef f():\n"
                      "    from evret_core.judge import resolve_judge\nfrom evret_core.sdk import Judge\n")
    assert sorted(core_imports(source)) == [(1, "evret_core.io.datasets"), (2, "evret_core.assign"),
                                            (4, "evret_core.judge"), (5, "evret_core.sdk")]


HEAVY = ("numpy", "pydantic", "asyncio", "sqlite3", "pytest")


def test_importing_the_sdk_loads_nothing_heavy() -> None:
    """The command of the issue, verbatim, its ``-X importtime`` lines parsed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVRET_")}
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", "import evret_core.sdk"], capture_output=True,
                          text=True, check=True, env=env)
    imported = [line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")]
    assert "evret_core.sdk" in imported and "evret_core.contracts.hooks" in imported
    assert [m for m in imported if m.partition(".")[0] in HEAVY] == []


SDK_PATH = REPO / "evret_core" / "sdk.py"


def sdk_imports(tree: ast.Module) -> list[str]:
    """The names ``sdk.py`` imports (the ``from __future__`` line aside)."""
    return [alias.asname or alias.name for node in tree.body if isinstance(node, ast.ImportFrom)
            and node.module != "__future__" for alias in node.names]


def test_the_sdk_is_a_plain_re_export() -> None:
    """Imports and ``__all__``, nothing else (no ``__getattr__``, no ``TYPE_CHECKING``); ``__all__`` is the imported
    names, sorted, and each is the module attribute it names."""
    tree = ast.parse(SDK_PATH.read_text(encoding="utf-8"))
    assert extra_statements(tree) == []
    assert "TYPE_CHECKING" not in SDK_PATH.read_text(encoding="utf-8")
    imported = sdk_imports(tree)
    assert sdk.__all__ == sorted(imported) and len(imported) == len(set(imported))
    assert all(getattr(sdk, name) is not None for name in imported)


def extra_statements(tree: ast.Module) -> list[str]:
    """The statements of a module other than its docstring, from-imports and ``__all__ = ...``."""
    body = tree.body[1:] if tree.body and isinstance(tree.body[0], ast.Expr) else tree.body
    return [ast.unparse(node).partition("\n")[0] for node in body if not isinstance(node, ast.ImportFrom)
            and not (isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["__all__"])]


def test_the_check_of_the_sdk_sees_an_extra_statement() -> None:
    tree = ast.parse('"""doc"""\nfrom a import b\nif TYPE_CHECKING:\n    from c import d\n__all__ = ["b"]\n\n\n'
                     "def __getattr__(name):\n    pass\n")
    assert sdk_imports(tree) == ["b"]
    assert extra_statements(tree) == ["if TYPE_CHECKING:", "def __getattr__(name):"]


def sdk_users() -> dict[str, set[str]]:
    """SDK name -> the files that import it from ``evret_core.sdk``: plugin files (sources and tests), the example
    plugin, and the python blocks of docs/*.md."""
    sources = [(p, p.read_text(encoding="utf-8")) for p in sorted(REPO.glob("plugins/*/**/*.py"))]
    sources += [(p, p.read_text(encoding="utf-8")) for p in sorted(REPO.glob("docs/examples/**/*.py"))]
    for doc in sorted(REPO.glob("docs/*.md")):
        sources += [(doc, block) for block in re.findall(r"```python\n(.*?)```", doc.read_text(encoding="utf-8"), re.S)]
    users: dict[str, set[str]] = {}
    for path, source in sources:
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and node.module == "evret_core.sdk":
                for alias in node.names:
                    users.setdefault(alias.name, set()).add(path.relative_to(REPO).as_posix())
    return users


def test_every_sdk_name_is_used_by_a_plugin() -> None:
    users = sdk_users()
    assert [name for name in sdk.__all__ if name not in users] == []
    assert "docs/hooks.md" in users["Perturbation"]
    assert any(user.startswith("docs/examples/") for user in users["hookimpl"])


def test_lazy_factory_imports_on_use_and_carries_attributes() -> None:
    factory = sdk.lazy("collections:OrderedDict", default_model="m-1")
    assert isinstance(factory, LazyFactory) and factory.default_model == "m-1"  # type: ignore[attr-defined]
    assert factory(a=1) == {"a": 1}


PLUGIN_NAMES = sorted(p.name for p in REPO.glob("plugins/*") if (p / "pyproject.toml").is_file())
@pytest.mark.parametrize("plugin", PLUGIN_NAMES)
def test_loading_a_plugin_imports_neither_numpy_nor_pydantic(plugin: str) -> None:
    """Registered through ``lazy(...)``, a plugin's classes (and what they import) load on first use only."""
    code = ("import json, sys\nfrom evret_core.plugins.loading import list_plugins\n"
            f"info = [p for p in list_plugins() if p.name == {plugin!r}]\n"
            "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'numpy', 'pydantic'})\n"
            "print(json.dumps([[i.registers, i.error] for i in info] + [heavy]))")
    env = {**os.environ, "EVRET_LOAD_PLUGINS": plugin}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    *infos, heavy = json.loads(out)
    if not infos:
        pytest.skip(f"{plugin} is not installed")
    [[registers, error]] = infos
    assert registers and error is None
    assert heavy == []


def test_a_lazy_factory_belongs_to_the_plugin_that_registered_it(fake_plugin: FakePlugin) -> None:
    """A ``lazy("other_package.module:Name")`` factory's ``sys.exit()`` is that plugin's failure, even when the
    class lives outside the package of its entry point (the factory object itself is evret_core's)."""
    site = fake_plugin("evret-hooks-only", """
        from evret_core.sdk import hookimpl, lazy

        @hookimpl
        def register_judges(register):
            register("exits-lazily", lazy("evret_exit_impl:ExitingJudge"))
    """)
    (site / "evret_exit_impl.py").write_text(
        "import sys\n\nclass ExitingJudge:\n    def __init__(self):\n        sys.exit(4)\n", encoding="utf-8")
    try:
        with pytest.raises(PluginError, match=r"plugin 'evret-hooks-only' .* called sys.exit\(4\) while evret ran"):
            create_judge("exits-lazily")
    finally:
        sys.modules.pop("evret_exit_impl", None)
