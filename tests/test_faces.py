"""What a module shows: no module of evret_core forwards unknown names through a module-level ``__getattr__`` but
the lazy public faces listed here, and no ``__all__`` (in the core, a plugin or the example plugin) holds a name
twice. Both are read from the source with ``ast``."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# The faces that load their public names on first use (evret_core.lazy.lazy_export, or the suites, which need
# pytest): the root (every `evret` command imports it), the SDK, evret_core.rag and evret_core.testing.
LAZY_FACES = {"evret_core/__init__.py", "evret_core/sdk.py", "evret_core/rag/__init__.py",
              "evret_core/testing/__init__.py"}


def _core_files() -> list[Path]:
    return sorted((ROOT / "evret_core").rglob("*.py"))


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


def test_only_the_lazy_faces_define_a_module_getattr() -> None:
    found = {path.relative_to(ROOT).as_posix() for path in _core_files() if _module_getattrs(path)}
    assert found == LAZY_FACES


def test_no_all_holds_a_name_twice() -> None:
    twice = {path.relative_to(ROOT).as_posix(): sorted(name for name, n in Counter(_all_names(path)).items() if n > 1)
             for path in _package_files()}
    assert {path: names for path, names in twice.items() if names} == {}
    assert len(_all_names(ROOT / "evret_core" / "__init__.py")) > 40  # the scan reads the root's list


def test_the_checks_see_what_they_look_for(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('__all__ = ["a", "b"]\n__all__ += ("a",)\n\n\ndef __getattr__(name):\n    raise AttributeError\n')
    assert _all_names(module) == ["a", "b", "a"] and _module_getattrs(module)
    module.write_text("class C:\n    def __getattr__(self, name):\n        return name\n")
    assert not _module_getattrs(module)  # a class's __getattr__ is no module face
