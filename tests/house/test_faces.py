"""What a module shows: no module of evret_core (or of the example plugin) forwards names through a module-level
``__getattr__`` but the root, ``evret_core/__init__.py``, whose public names are written once (its ``TYPE_CHECKING``
block of ``from module import Name as Name`` lines), and no ``__all__`` (in the core, a plugin or the example plugin)
holds a name twice. Read from the source with ``ast``; the root's list is also checked at run time."""

from __future__ import annotations

import ast
import json
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# The one lazy face: every `evret` command imports the root, so its names load on first use.
LAZY_FACES = {"evret_core/__init__.py"}


def _core_files() -> list[Path]:
    """Every Python file of evret_core and of the example plugin (the plugins of ``plugins/`` keep their lazy
    ``__getattr__``: it keeps their backends, chromadb and the like, out of plugin loading)."""
    return [*sorted((ROOT / "evret_core").rglob("*.py")), *sorted(ROOT.glob("docs/examples/*/evret_*/**/*.py"))]


def _package_files() -> list[Path]:
    """Every Python file of evret_core, of each plugin's package and of the example plugin's package."""
    roots = [ROOT / "evret_core", *sorted(ROOT.glob("plugins/*/evret_*")), *sorted(ROOT.glob("docs/examples/*/evret_*"))]
    return [path for root in roots for path in sorted(root.rglob("*.py"))]


def _module_getattrs(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(node, ast.FunctionDef) and node.name == "__getattr__" for node in tree.body)


def _all_names(path: Path) -> list[str]:
    """The names of the module's ``__all__`` (every assignment and ``+=`` at module level), in order; a value that
    is not a literal list or tuple of strings fails the test, naming the file and line."""
    names: list[str] = []
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if not any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            continue
        literal = ast.literal_eval(value) if isinstance(value, (ast.List, ast.Tuple)) else None
        assert isinstance(literal, (list, tuple)) and all(isinstance(n, str) for n in literal), \
            f"{path.relative_to(ROOT)}:{node.lineno}: __all__ is not a literal list of strings"
        names.extend(literal)
    return names


def test_only_the_root_defines_a_module_getattr() -> None:
    found = {path.relative_to(ROOT).as_posix() for path in _core_files() if _module_getattrs(path)}
    assert found == LAZY_FACES


def test_no_all_holds_a_name_twice() -> None:
    twice = {path.relative_to(ROOT).as_posix(): sorted(name for name, n in Counter(_all_names(path)).items() if n > 1)
             for path in _package_files()}
    assert {path: names for path, names in twice.items() if names} == {}
    assert len(_all_names(ROOT / "evret_core" / "sdk.py")) > 40  # the scan reads a face's list


def _type_checking_names(path: Path) -> list[str]:
    """The names the ``if TYPE_CHECKING:`` block of ``path`` imports, in order; each must be imported ``as``
    itself (the form that re-exports it to type checkers)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    [block] = [node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"]
    names = []
    for node in block.body:
        assert isinstance(node, ast.ImportFrom), f"{path.name}:{node.lineno}: not a from-import"
        for alias in node.names:
            assert alias.asname == alias.name, f"{path.name}:{node.lineno}: {alias.name} is not imported as itself"
            names.append(alias.name)
    return names


def test_the_roots_names_are_written_once_and_resolve() -> None:
    import evret_core

    listed = _type_checking_names(ROOT / "evret_core" / "__init__.py")
    assert len(listed) == len(set(listed)) > 40
    assert evret_core.__all__ == sorted(listed)
    source = (ROOT / "evret_core" / "__init__.py").read_text(encoding="utf-8")
    assert all(source.count(f" {name} as {name}") == 1 for name in listed)
    for name in listed:  # each resolves to the object of the module its import names
        assert getattr(evret_core, name) is not None
    assert set(listed) <= set(dir(evret_core))


def test_the_checks_see_what_they_look_for(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('__all__ = ["a", "b"]\n__all__ += ("a",)\n\n\ndef __getattr__(name):\n    raise AttributeError\n')
    assert _all_names(module) == ["a", "b", "a"] and _module_getattrs(module)
    module.write_text("class C:\n    def __getattr__(self, name):\n        return name\n")
    assert not _module_getattrs(module)  # a class's __getattr__ is no module face


def test_the_roots_names_are_read_from_bytecode_when_no_source_is_installed(tmp_path: Path) -> None:
    import py_compile
    import subprocess
    import sys

    package = tmp_path / "evret_core"
    package.mkdir()
    for name in ("__init__", "version"):  # sourceless: the .pyc in place of the .py
        py_compile.compile(str(ROOT / "evret_core" / f"{name}.py"), cfile=str(package / f"{name}.pyc"), doraise=True)
    code = "import json, evret_core; print(json.dumps([evret_core.__file__, evret_core.__all__]))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          env={"PYTHONPATH": str(tmp_path), "PATH": ""}, check=True)
    where, names = json.loads(proc.stdout)
    assert where.endswith(".pyc") and names == sorted(_type_checking_names(ROOT / "evret_core" / "__init__.py"))
