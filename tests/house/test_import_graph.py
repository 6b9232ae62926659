"""The import graph of evret_core and evret-ray has no circles, and no two core modules share a file name.

The graph is built with ``ast`` from every ``import``/``from ... import`` of a project module, at top level and
inside functions alike (an import hidden in a function is still a circle: it only moves the failure to call time);
imports under ``if TYPE_CHECKING:`` are left out (they never run). ``from package import submodule`` (a Python
module or a compiled extension) is an edge to the submodule, not to the package's ``__init__``.

The layers of docs/architecture.md (its ``## Layers`` block, the one place the order is written) hold every
import of the core, at module level, inside functions and under TYPE_CHECKING alike: a module imports modules of
its own line or of lower lines only, and no imports form a circle of any kind.

A ratchet counts the indirections left (imports inside functions, TYPE_CHECKING imports, module names written as
strings): none may grow.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
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


IMPORT_KINDS = ("module", "function", "type_checking")


@dataclass(frozen=True)
class Edge:
    """One import of a project module: where it is, what it imports, and when it runs (``module``: at import;
    ``function``: inside a ``def`` or ``lambda``; ``type_checking``: never, under ``if TYPE_CHECKING:``)."""

    source: str
    target: str
    kind: str
    path: Path
    line: int

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT).as_posix()}:{self.line}: {self.source} -> {self.target} ({self.kind})"


def _import_statements(tree: ast.AST) -> list[tuple[ast.Import | ast.ImportFrom, str]]:
    """Every import statement of ``tree`` with its kind (see :class:`Edge`); TYPE_CHECKING wins over function."""
    found: list[tuple[ast.Import | ast.ImportFrom, str]] = []

    def visit(node: ast.AST, kind: str) -> None:
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append((node, kind))
        for child in ast.iter_child_nodes(node):
            inner = kind
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test) and child in node.body:
                inner = "type_checking"
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) and kind == "module":
                inner = "function"
            visit(child, inner)

    visit(tree, "module")
    return found


def import_edges() -> list[Edge]:
    """Every import of a project module by a module of evret_core or evret_ray, one edge per imported module."""
    mods = _modules()
    edges: list[Edge] = []
    for name, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node, kind in _import_statements(tree):
            for target in dict.fromkeys(_imported(node, name, path.name == "__init__.py", mods)):
                if target in mods and target != name:
                    edges.append(Edge(name, target, kind, path, node.lineno))
    return edges


def import_graph(kinds: tuple[str, ...] = ("module", "function")) -> dict[str, set[str]]:
    """``{module: the project modules it imports}`` for every module of evret_core and evret_ray, counting the
    imports of ``kinds`` (by default those that run: TYPE_CHECKING imports left out)."""
    graph: dict[str, set[str]] = {name: set() for name in _modules()}
    for edge in import_edges():
        if edge.kind in kinds:
            graph[edge.source].add(edge.target)
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
    assert "evret_core.contracts.errors" in graph["evret_core.io.datasets"]
    assert "evret_core.io.datasets" in graph["evret_core.plugins.builder"]  # an import inside a function counts
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


# -- the layers ---------------------------------------------------------------------------------------------------

def layers(text: str) -> list[list[str]]:
    """The lines of the fenced block under ``## Layers`` of ``text`` (docs/architecture.md), lowest first: on each,
    the names of packages and top-level modules of evret_core that come before its description (which starts after
    two spaces or more); ``__init__`` is the root package."""
    block = text.split("\n## Layers\n", 1)[1].split("```", 2)[1]
    return [re.split(r" {2,}", line.strip(), maxsplit=1)[0].split() for line in block.splitlines() if line.strip()]


def layer_name(module: str) -> str:
    """The name a module goes by in the layers: its package or top-level module under evret_core (``judge`` for
    ``evret_core.judge.lexical``, ``text`` for ``evret_core.text``, ``__init__`` for ``evret_core``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def against_the_layers(edges: Iterable[Edge], lines: list[list[str]]) -> list[Edge]:
    """The edges that import a module of a higher line than their own."""
    line = {name: i for i, names in enumerate(lines) for name in names}
    return [e for e in edges if line[layer_name(e.target)] > line[layer_name(e.source)]]


def _documented_layers() -> list[list[str]]:
    return layers((ROOT / "docs" / "architecture.md").read_text(encoding="utf-8"))


def test_the_layers_checker_finds_an_import_against_them() -> None:
    text = ("# Doc\n\n## Layers\n\nSome prose.\n\n```\ncontracts            the floor\nversion text  light  "
            "ones\njudge\n__init__ cli\n```\n\n## Next\n\n```\nnot layers\n```\n")
    lines = layers(text)
    assert lines == [["contracts"], ["version", "text"], ["judge"], ["__init__", "cli"]]
    down = Edge("evret_core.judge.lexical", "evret_core.text", "module", ROOT, 1)
    up = Edge("evret_core.text", "evret_core.judge.lexical", "module", ROOT, 2)
    same_line = Edge("evret_core.version", "evret_core.text", "module", ROOT, 3)
    from_the_root = Edge("evret_core", "evret_core.contracts.errors", "module", ROOT, 4)
    to_the_root = Edge("evret_core.cli.evaluate", "evret_core", "module", ROOT, 5)
    to_the_top = Edge("evret_core.contracts.errors", "evret_core.cli", "module", ROOT, 6)
    assert against_the_layers([down, up, same_line, from_the_root, to_the_root, to_the_top], lines) == [
        up, to_the_top]


def test_the_layers_name_every_package_and_top_level_module_once() -> None:
    named = [name for line in _documented_layers() for name in line]
    assert len(named) == len(set(named)), [n for n in named if named.count(n) > 1]
    actual = {layer_name(m) for m in _modules() if m.split(".")[0] == "evret_core"}
    assert sorted(named) == sorted(actual)


def test_no_import_runs_against_the_layers() -> None:
    """Every import of the core, at module level, inside a function or under TYPE_CHECKING, goes to its own line
    of the layers or a lower one; ``contracts`` imports nothing of evret_core outside ``contracts``."""
    edges = [e for kind in IMPORT_KINDS for e in core_edges(kind)]
    found = against_the_layers(edges, _documented_layers())
    assert found == [], "imports against the layers of docs/architecture.md:\n  " + "\n  ".join(map(str, found))
    from_contracts = [e for e in edges if layer_name(e.source) == "contracts" and layer_name(e.target) != "contracts"]
    assert from_contracts == [], "\n".join(map(str, from_contracts))


# -- the ratchet --------------------------------------------------------------------------------------------------
# The indirections left, as measured when issue 34 closed (it started at 311 imports inside functions, 120 under
# TYPE_CHECKING and 394 module names in strings, with 63 modules in the largest circle; no circle is left): what a
# change removes, it lowers here in its own commit; a change that makes one grow fails. 34 of the strings are the
# built-ins' lazy factories (plugins/builtins.py), registered by name so that `evret --help` imports none of them;
# the loader names that module, and the HTML report its templates' package. Two of the imports inside functions are
# `evret agreement`'s (its computation and the table layout, loaded when it runs, so `evret --help` loads no numpy).
# Six are `evret trace`'s and the trace report's (the evaluator, the judge builder, the report renderers: loaded
# when the command runs). One is `evret evaluate`'s pipeline (cli/_pipeline.py, loaded when --pipeline or
# a [pipeline] table is given).
# Two more are `evret fuse`'s (the TREC run reader and the fusion, loaded when it runs, for the same reason).
# Eleven are `evret evaluate`'s over conversation datasets (the turn evaluator, its config, tables and report,
# loaded when a conversation dataset is given).
# Twenty-one are `evret judge`'s and `evret trace`'s own (the judge builder, the pool, the trace readers, the
# evaluator: loaded when the command runs, so `evret --help` loads none of them, nor pluggy).
# Four are `evret fuse`'s, `evret report`'s and `evret calibrate`'s (the output writer and `grade_key`, loaded
# when the command runs, so `evret --help` loads neither `tempfile` nor `dataclasses`).
FUNCTION_LEVEL_IMPORTS = 345  # imports of evret_core modules inside functions of evret_core
TYPE_CHECKING_IMPORTS = 65  # imports of evret_core modules under `if TYPE_CHECKING:` in evret_core
STRING_ADDRESSED_MODULES = 38  # strings in evret_core naming an evret_core module ("pkg.mod", "pkg.mod:Name")

_MODULE_STRING = re.compile(r"evret_core(?:\.[A-Za-z_][A-Za-z0-9_]*)+(?::(?:[A-Za-z_][A-Za-z0-9_]*|\{\}))?")


def circles(edges: list[Edge]) -> list[list[str]]:
    """The circles of ``edges`` whatever their kind (module, function, TYPE_CHECKING), each sorted."""
    graph: dict[str, set[str]] = {name: set() for name in _modules()}
    for edge in edges:
        graph[edge.source].add(edge.target)
    return cycles(graph)


def core_edges(kind: str) -> list[Edge]:
    """The imports of ``kind`` that evret_core makes of its own modules."""
    return [e for e in import_edges() if e.kind == kind and e.source.startswith("evret_core")
            and e.target.startswith("evret_core")]


def _string_values(tree: ast.Module) -> list[tuple[int, str]]:
    """Every string constant of a module, with f-strings whose fields are module-level string constants filled
    in (``f"{_RAG}.claims:Judge"``; a field computed at run time after ``module:`` is written ``{}``), and their
    lines."""
    constants = {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign) and isinstance(
        n.value, ast.Constant) and isinstance(n.value.value, str) for t in n.targets if isinstance(t, ast.Name)}
    found: list[tuple[int, str]] = []
    inside_fstrings = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in inside_fstrings:
            found.append((node.lineno, node.value))
        elif isinstance(node, ast.JoinedStr):
            parts = []
            for value in node.values:
                if isinstance(value, ast.Constant):
                    parts.append(str(value.value))
                elif isinstance(value, ast.FormattedValue) and isinstance(value.value, ast.Name) and \
                        value.value.id in constants:
                    parts.append(constants[value.value.id])
                else:  # a field computed at run time: the module part before it still names a module
                    prefix = "".join(parts)
                    if prefix.endswith(":"):
                        found.append((node.lineno, prefix + "{}"))
                    break
            else:
                found.append((node.lineno, "".join(parts)))
    return found


def string_addressed_modules() -> list[str]:
    """``path:line: string`` for every string of evret_core that names an evret_core module (a dotted path, or a
    ``module:Name`` target), as lazy tables, lazy factories and moved-module aliases write them."""
    found = []
    for name, path in _modules().items():
        if not name.startswith("evret_core"):
            continue
        for line, value in _string_values(ast.parse(path.read_text(encoding="utf-8"))):
            if _MODULE_STRING.fullmatch(value):
                found.append(f"{path.relative_to(ROOT).as_posix()}:{line}: {value}")
    return found


def test_the_counters_see_each_kind_of_import() -> None:
    kinds = {(e.source, e.target): e.kind for e in import_edges()}
    assert kinds[("evret_core.plugins.builder", "evret_core.io.datasets")] == "function"
    assert kinds[("evret_core", "evret_core.contracts.judge")] == "type_checking"
    assert kinds[("evret_core.judge.resolve", "evret_core.plugins.registry")] == "module"
    strings = string_addressed_modules()
    assert any(s.endswith(": evret_core.judge.lexical:ExactJudge") and "plugins/builtins.py" in s for s in strings)
    assert any(s.endswith(": evret_core.rag.claims.claim_judges:LexicalClaimJudge") for s in strings)  # f-string
    errors, aio = "evret_core.contracts.errors", "evret_core.contracts.aio"
    assert circles([Edge(errors, aio, "module", ROOT, 1), Edge(aio, errors, "type_checking", ROOT, 1)]) == [
        [aio, errors]]


def test_no_import_circle_of_any_kind() -> None:
    """No circle in evret_core and evret_ray, counting module-level, function-level and TYPE_CHECKING imports alike."""
    edges = import_edges()
    found = circles(edges)
    described = [", ".join(circle) + "\n    " + "\n    ".join(str(e) for e in edges if e.source in circle
                                                            and e.target in circle) for circle in found]
    assert found == [], "import circles (with their edges):\n  " + "\n  ".join(described)


def test_ratchet_function_level_imports() -> None:
    edges = core_edges("function")
    assert len(edges) <= FUNCTION_LEVEL_IMPORTS, "\n".join(map(str, edges))


def test_ratchet_type_checking_imports() -> None:
    edges = core_edges("type_checking")
    assert len(edges) <= TYPE_CHECKING_IMPORTS, "\n".join(map(str, edges))


def test_ratchet_string_addressed_modules() -> None:
    strings = string_addressed_modules()
    assert len(strings) <= STRING_ADDRESSED_MODULES, "\n".join(strings)
