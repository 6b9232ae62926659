"""The import graph of evret_core and evret-ray has no circles, and no two core modules share a file name.

The graph is built with ``ast`` from every ``import``/``from ... import`` of a project module, at top level and
inside functions alike (an import hidden in a function is still a circle: it only moves the failure to call time);
imports under ``if TYPE_CHECKING:`` are left out (they never run). ``from package import submodule`` (a Python
module or a compiled extension) is an edge to the submodule, not to the package's ``__init__``.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"evret_core": ROOT / "evret_core", "evret_ray": ROOT / "plugins" / "evret-ray" / "evret_ray"}


def _modules() -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for package, base in PACKAGES.items():
        for path in sorted(base.rglob("*.py")):
            parts = [package, *path.relative_to(base).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            mods[".".join(parts)] = path
    return mods


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for stmt in node.body:
                skip.update(id(n) for n in ast.walk(stmt))
    return skip


def _imported(node: ast.AST, name: str, is_package: bool, mods: dict[str, Path]) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:
        base = name.split(".") if is_package else name.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        module = ".".join(base + ([node.module] if node.module else []))
    else:
        module = node.module or ""
    submodules = [f"{module}.{alias.name}" for alias in node.names]
    names_only_submodules = all(m in mods or _extension(m) for m in submodules)
    return submodules if names_only_submodules else [module, *submodules]


def _extension(module: str) -> bool:
    """Whether ``module`` is a compiled extension module of one of the packages (``evret_core.metrics._fastrank``)."""
    package, _, rest = module.partition(".")
    if package not in PACKAGES or not rest:
        return False
    *folders, last = rest.split(".")
    folder = PACKAGES[package].joinpath(*folders)
    return any(folder.glob(f"{last}.*.so")) or any(folder.glob(f"{last}.*.pyd")) or (folder / f"{last}.c").exists()


def import_graph() -> dict[str, set[str]]:
    """``{module: the project modules it imports}`` for every module of evret_core and evret_ray."""
    mods = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _type_checking_nodes(tree)
        deps: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            for target in _imported(node, name, path.name == "__init__.py", mods):
                if target in mods and target != name:
                    deps.add(target)
        graph[name] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_graph_sees_real_imports() -> None:
    graph = import_graph()
    assert "evret_core.errors" in graph["evret_core.data.models"]
    assert "evret_core.llm.cache" in graph["evret_core.plugins.recipes"]  # an import inside a function counts
    assert "evret_ray.remote_errors" in graph["evret_ray.shards"]


def test_the_checker_finds_a_circle() -> None:
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_two_modules_import_each_other() -> None:
    graph = import_graph()
    pairs = sorted({tuple(sorted((a, b))) for a, deps in graph.items() for b in deps if a in graph[b]})
    assert pairs == []


def test_no_import_circle_of_any_length() -> None:
    assert cycles(import_graph()) == []


def _layout_tree() -> list[str]:
    """The module paths the layout tree of docs/architecture.md names, from its indentation."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = text.split("## Layout", 1)[1].split("```", 2)[1]
    paths: list[str] = []
    folders: list[str] = []
    for line in block.splitlines():
        if not line.strip():
            continue
        depth = (len(line) - len(line.lstrip(" "))) // 2
        name = line.split()[0]
        del folders[depth:]
        if name.endswith("/"):
            folders.append(name.rstrip("/"))
        else:
            paths.append("/".join([*folders, name]))
    return paths


def test_the_layout_tree_names_every_module_once() -> None:
    named = _layout_tree()
    actual = sorted(p.relative_to(ROOT).as_posix() for p in PACKAGES["evret_core"].rglob("*.py"))
    assert len(named) == len(set(named)), [p for p in named if named.count(p) > 1]
    assert sorted(named) == actual
    assert "evret_core/rag/harness.py" in named


def test_no_two_modules_share_a_file_name() -> None:
    by_name: dict[str, list[str]] = {}
    for path in PACKAGES["evret_core"].rglob("*.py"):
        if path.name not in ("__init__.py", "__main__.py"):
            by_name.setdefault(path.name, []).append(path.relative_to(ROOT).as_posix())
    shared = {name: paths for name, paths in by_name.items() if len(paths) > 1}
    assert shared == {}


def test_every_module_imports_first() -> None:
    """Each core module imported before any other (a fresh ``sys.modules`` for each): a circle that runs through a
    package's ``__init__`` (which the graph above does not follow) fails here."""
    import subprocess
    import sys

    code = (
        "import importlib, sys, warnings\n"
        "warnings.simplefilter('error')\n"
        "bad = []\n"
        "for name in sys.argv[1:]:\n"
        "    for m in [m for m in sys.modules if m == 'evret_core' or m.startswith('evret_core.')]:\n"
        "        del sys.modules[m]\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception as exc:\n"
        "        bad.append(f'{name}: {exc!r}')\n"
        "print('\\n'.join(bad))\n"
    )
    names = [m for m in _modules() if m.startswith("evret_core") and m != "evret_core.cli.__main__"]
    done = subprocess.run([sys.executable, "-c", code, *names], capture_output=True, text=True, cwd=ROOT,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == ""
