#!/usr/bin/env python3
"""Rewrite every reference to moved modules and names, from a path map (a dev tool of issue 34's restructure).

A map entry is ``"old.module": "new.module"`` (the module moved, or was renamed: ``old.module.x`` becomes
``new.module.x``) or ``"old.module:Name": "new.module"`` (one name moved out of a module that stays). Moving the
code is done by hand first; this tool then rewrites the references, in the files and folders given (default: the
repository's code, tests, plugins, benchmarks, docs and examples):

1. import statements, found with ``ast`` at any depth (in functions, under ``if TYPE_CHECKING:``):
   ``from old import a, b as c`` becomes one statement per destination module, at the same indentation;
   ``from pkg import module`` follows the module (``as`` keeps its old name where the file was renamed);
   ``import old.module [as x]``; relative imports of a moved module become absolute;
2. lazy tables: a dict literal ``{"Name": "old.module"}`` follows ``Name``;
3. dotted mentions in strings, comments, docstrings and Markdown: ``old.module``, ``old.module.Name``,
   ``"old.module:Name"`` (entry points, ``lazy()`` targets, ``mock.patch`` targets), paths ``old/module.py``,
   and ``from old import a`` lines in docs' code blocks and doctests; the longest match wins;
4. the layout tree of docs/architecture.md: the line of a moved file is re-filed under its new folder;
5. ``ruff check --fix --select I,F401`` on the Python files it changed (``--no-ruff`` skips it).

It rewrites only what the map names, and applying the same map twice changes nothing (a destination may not be
a source). It refuses a map whose destination does not define a moved name, or whose source still defines it
(the code was not moved), and it reports what it cannot rewrite: a moved name reached in code through its old
module (``old.module.Name`` after ``import old.module``), and every dotted mention of a mapped package that does
not resolve to a module or a name it binds. An f-string built from module-level constants (``f"{_PKG}.mod:X"``)
that names a moved module is reported, not rewritten; other names built at run time are not seen.

    python .ci/relocate.py --map moves.json [--dry-run] [--no-ruff] [PATH ...]
"""

from __future__ import annotations

import argparse
import ast
import difflib
import io
import json
import re
import shutil
import subprocess
import sys
import tokenize
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_PATHS = ("evret_core", "plugins", "tests", "benchmarks", "docs", "examples", "README.md", "setup.py",
                 "pyproject.toml", "mkdocs.yml", "Makefile")
SUFFIXES = {".py", ".pyi", ".md", ".rst", ".toml", ".cfg", ".ini", ".yml", ".yaml", ".c", ".h"}
# outputs of earlier code, kept byte for byte: never rewritten
EXCLUDED = ("tests/golden/expected", "tests/golden/inputs", "tests/results/data")
SKIPPED_DIRS = {".git", ".venv", "__pycache__", "build", "dist", "site", ".mypy_cache", ".ruff_cache"}
LINE_LENGTH = 110
LAYOUT_DOC = "docs/architecture.md"
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


class MapError(Exception):
    """A path map that cannot be applied (the message says which entry and why)."""


# -- the map ------------------------------------------------------------------------------------------------------

@dataclass
class PathMap:
    """Module moves (``old -> new``, also covering everything below ``old``) and name moves (``(old, Name) ->
    new``)."""

    modules: dict[str, str] = field(default_factory=dict)
    names: dict[tuple[str, str], str] = field(default_factory=dict)

    @classmethod
    def parse(cls, entries: Mapping[str, str]) -> PathMap:
        made = cls()
        for old, new in entries.items():
            if not re.fullmatch(rf"{_IDENT}(\.{_IDENT})*(:{_IDENT})?", old) or not re.fullmatch(
                    rf"{_IDENT}(\.{_IDENT})*", new):
                raise MapError(f"map entry {old!r}: {new!r}: expected 'pkg.module' or 'pkg.module:Name' -> "
                               f"'pkg.module'")
            if ":" in old:
                module, name = old.split(":")
                made.names[(module, name)] = new
            else:
                made.modules[old] = new
        moved = [(old, None, new) for old, new in made.modules.items()]
        moved += [(f"{module}:{name}", name, new) for (module, name), new in made.names.items()]
        for source, name, new in moved:
            if made.module(new) is not None or (name is not None and (new, name) in made.names):
                raise MapError(f"map entry {source!r}: its destination {new!r} is itself moved by the map (apply "
                               f"the two maps one after the other)")
        return made

    @property
    def roots(self) -> set[str]:
        """The top-level packages the map moves things in (mentions of other packages are never touched;
        ``evret_core`` for an empty map, which only checks the mentions)."""
        return {m.split(".")[0] for m in [*self.modules, *self.modules.values(), *(m for m, _ in self.names),
                                         *self.names.values()]} or {"evret_core"}

    def module(self, dotted: str) -> str | None:
        """The new path of module ``dotted`` (or of a name under it), by the longest module entry; None if none."""
        parts = dotted.split(".")
        for i in range(len(parts), 0, -1):
            new = self.modules.get(".".join(parts[:i]))
            if new is not None:
                return ".".join([new, *parts[i:]])
        return None

    def name(self, module: str, name: str) -> str | None:
        """The new module of ``module:name`` (a name entry, else the module's move), or None."""
        new = self.names.get((module, name))
        return new if new is not None else self.module(module)

    def dotted(self, text: str) -> tuple[str, bool] | None:
        """A dotted mention rewritten (``old.mod``, ``old.mod.Name.attr``): ``(new text, by a name entry)``."""
        parts = text.split(".")
        for i in range(len(parts) - 1, 0, -1):
            new = self.names.get((".".join(parts[:i]), parts[i]))
            if new is not None:
                return ".".join([new, *parts[i:]]), True
        moved = self.module(text)
        return (moved, False) if moved is not None else None


# -- the modules of the tree: what exists and what each binds -------------------------------------------------------

class ModuleIndex:
    """The modules under ``root`` of the given top-level packages (found at ``root/<pkg>`` and
    ``root/plugins/*/<pkg>``), and the names each binds at module level."""

    def __init__(self, root: Path, packages: Iterable[str]) -> None:
        self.files: dict[str, Path] = {}
        self.extensions: set[str] = set()
        for package in packages:
            for base in [root / package, *sorted(root.glob(f"plugins/*/{package}"))]:
                if base.is_dir():
                    self._walk(package, base)
        self._bound: dict[str, set[str]] = {}

    def _walk(self, package: str, base: Path) -> None:
        for path in sorted(base.rglob("*")):
            if SKIPPED_DIRS.intersection(path.relative_to(base).parts):
                continue
            parts = [package, *path.relative_to(base).parts]
            if path.suffix in (".py", ".pyi"):
                parts[-1] = path.stem
                if parts[-1] == "__init__":
                    parts.pop()
                self.files.setdefault(".".join(parts), path)
            elif path.suffix in (".c", ".so", ".pyd"):
                self.extensions.add(".".join([*parts[:-1], path.name.split(".")[0]]))

    def exists(self, module: str) -> bool:
        return module in self.files or module in self.extensions

    def bound(self, module: str) -> set[str]:
        """Names bound at the top of ``module`` (defined, assigned, imported, or listed by a lazy ``__getattr__``
        table), plus its submodules."""
        if module not in self._bound:
            names = {m[len(module) + 1:].split(".")[0] for m in [*self.files, *self.extensions]
                     if m.startswith(module + ".")}
            path = self.files.get(module)
            if path is not None:
                tree = ast.parse(path.read_text(encoding="utf-8"))
                names |= defined(tree) | imported_names(tree)
                if "__getattr__" in names:
                    names |= lazy_table_keys(tree)
            self._bound[module] = names
        return self._bound[module]

    def defines(self, module: str, name: str) -> bool:
        """Whether ``module`` defines ``name`` itself (a def, class or assignment: not an import)."""
        path = self.files.get(module)
        return path is not None and name in defined(ast.parse(path.read_text(encoding="utf-8")))


def _top_level(tree: ast.Module) -> Iterator[ast.stmt]:
    """Module-level statements, including those under module-level if/try (TYPE_CHECKING, fallbacks)."""
    stack: list[ast.stmt] = list(tree.body)
    while stack:
        node = stack.pop(0)
        yield node
        if isinstance(node, ast.If | ast.Try):
            stack.extend([*node.body, *node.orelse, *getattr(node, "finalbody", []),
                          *(s for h in getattr(node, "handlers", []) for s in h.body)])


def defined(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in _top_level(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return names


def imported_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in _top_level(tree):
        if isinstance(node, ast.ImportFrom | ast.Import):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def lazy_table_keys(tree: ast.Module) -> set[str]:
    keys: set[str] = set()
    for node in _top_level(tree):
        value = getattr(node, "value", None)
        if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(value, ast.Dict):
            keys.update(k.value for k in value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str))
    return keys


def check_map(moves: PathMap, index: ModuleIndex) -> list[str]:
    """What is wrong with applying ``moves`` to the tree as it is now (empty: nothing)."""
    problems = []
    for old, new in moves.modules.items():
        if not index.exists(new):
            problems.append(f"{old} -> {new}: there is no module {new} (move the file first)")
        if index.exists(old):
            problems.append(f"{old} -> {new}: {old} still exists (move the file, leave nothing at the old path)")
    for (module, name), new in moves.names.items():
        if not index.defines(new, name):
            problems.append(f"{module}:{name} -> {new}: {new} does not define {name} (move the code first)")
        if index.defines(module, name):
            problems.append(f"{module}:{name} -> {new}: {module} still defines {name} (cut it there, no alias)")
    return problems


# -- rewriting Python import statements -------------------------------------------------------------------------

@dataclass
class Report:
    """What a run changed and what it could not."""

    changed: dict[Path, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)


def _absolute(module: str | None, level: int, here: str | None, is_package: bool) -> str | None:
    """The absolute module of ``from <level dots><module> import``, or None when ``here`` is unknown."""
    if not level:
        return module
    if here is None:
        return None
    base = here.split(".") if is_package else here.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, module] if module else base) or None


def _from_groups(moves: PathMap, module: str, aliases: list[tuple[str, str | None]]
                 ) -> list[tuple[str, list[tuple[str, str | None]]]]:
    """``from module import aliases`` split by destination: ``[(module, [(name, asname)])]`` in first-seen order."""
    groups: dict[str, list[tuple[str, str | None]]] = {}
    for name, asname in aliases:
        target, new_name = module, name
        if name != "*":
            moved = moves.names.get((module, name))
            full = moves.module(f"{module}.{name}") if moved is None else None
            if moved is not None:
                target = moved
            elif full is not None:
                target, new_name = full.rsplit(".", 1)
        else:
            target = moves.module(module) or module
        if new_name != name and asname is None:
            asname = name  # a renamed module keeps the name the code uses
        groups.setdefault(target, []).append((new_name, asname))
    return list(groups.items())


def _import_text(module: str, aliases: list[tuple[str, str | None]], indent: str) -> str:
    names = [f"{n} as {a}" if a and a != n else n for n, a in aliases]
    line = f"from {module} import {', '.join(names)}"
    if len(indent) + len(line) <= LINE_LENGTH:
        return line
    inner = "".join(f"\n{indent}    {n}," for n in names)
    return f"from {module} import ({inner}\n{indent})"


def rewrite_from(moves: PathMap, module: str, written: str, aliases: list[tuple[str, str | None]],
                 indent: str) -> list[str] | None:
    """The statements replacing ``from <written> import aliases`` (``module``: its absolute form), or None when
    nothing moves."""
    groups = _from_groups(moves, module, aliases)
    if len(groups) == 1 and groups[0][0] == module and groups[0][1] == aliases:
        return None
    return [_import_text(written if target == module else target, names, indent) for target, names in groups]


class _Lines:
    """Offsets into a source text from ast's (line, UTF-8 byte column) positions."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0]
        for line in text.splitlines(keepends=True):
            self.starts.append(self.starts[-1] + len(line))

    def offset(self, line: int, col: int) -> int:
        start = self.starts[line - 1]
        row = self.text[start: self.starts[line] if line < len(self.starts) else len(self.text)]
        return start + len(row.encode("utf-8")[:col].decode("utf-8", "replace"))


def _python_edits(moves: PathMap, text: str, here: str | None, is_package: bool, where: str,
                  report: Report) -> list[tuple[int, int, str]]:
    """``(start, end, new text)`` for the import statements and lazy-table entries that ``moves`` changes."""
    tree = ast.parse(text)
    lines = _Lines(text)
    edits: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom | ast.Import):
            start = lines.offset(node.lineno, node.col_offset)
            end = lines.offset(node.end_lineno or node.lineno, node.end_col_offset or 0)
            line_start = lines.starts[node.lineno - 1]
            before = text[line_start:start]
            indent = before if not before.strip() else re.match(r"\s*", before).group(0)  # type: ignore[union-attr]
            joiner = f"\n{indent}" if not before.strip() else "; "
            segment = text[start:end]
            new = _rewrite_import(moves, node, segment, here, is_package, indent, where, report)
            if new is not None:
                if "#" in segment and len(new) > 1:
                    report.warnings.append(f"{where}:{node.lineno}: a comment inside a split import was dropped")
                edits.append((start, end, joiner.join(new)))
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if (isinstance(key, ast.Constant) and isinstance(key.value, str) and key.value.isidentifier()
                        and isinstance(value, ast.Constant) and isinstance(value.value, str)
                        and re.fullmatch(rf"{_IDENT}(\.{_IDENT})*", value.value)):
                    moved = moves.names.get((value.value, key.value))
                    if moved is not None:
                        start = lines.offset(value.lineno, value.col_offset)
                        end = lines.offset(value.end_lineno or value.lineno, value.end_col_offset or 0)
                        edits.append((start, end, text[start:end].replace(value.value, moved)))
    return edits


def _rewrite_import(moves: PathMap, node: ast.Import | ast.ImportFrom, segment: str, here: str | None,
                    is_package: bool, indent: str, where: str, report: Report) -> list[str] | None:
    if isinstance(node, ast.Import):
        aliases = [(a.name, a.asname) for a in node.names]
        new = [(moves.module(n) or n, a) for n, a in aliases]
        if new == aliases:
            return None
        return ["import " + ", ".join(f"{n} as {a}" if a else n for n, a in new)]
    module = _absolute(node.module, node.level, here, is_package)
    if module is None:
        return None
    aliases = [(a.name, a.asname) for a in node.names]
    if any(n == "*" for n, _ in aliases) and any(m == module for m, _ in moves.names):
        report.warnings.append(f"{where}:{node.lineno}: 'from {module} import *' and names of {module} moved: "
                               f"edit by hand")
    written = re.match(r"from\s+(\S+)\s+import", segment).group(1)  # type: ignore[union-attr]
    groups = _from_groups(moves, module, aliases)
    if len(groups) == 1 and groups[0][1] == aliases:
        target = groups[0][0]
        if target == module:
            return None
        # one destination, same names: change the module only, keeping the statement's layout and comments
        return [re.sub(r"^from\s+\S+", f"from {target}", segment, count=1)]
    return rewrite_from(moves, module, written, aliases, indent)


def _apply(text: str, edits: list[tuple[int, int, str]]) -> str:
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text


# -- dotted mentions in any text ----------------------------------------------------------------------------------

_FROM_LINE = re.compile(rf"^(?P<lead>[ \t]*(?:>>> |\.\.\. )?[ \t]*)from (?P<module>{_IDENT}(?:\.{_IDENT})*) "
                        rf"import (?P<names>{_IDENT}(?: as {_IDENT})?(?:, *{_IDENT}(?: as {_IDENT})?)*)[ \t]*$",
                        re.M)


def _mention_pattern(roots: Iterable[str]) -> re.Pattern[str]:
    alternatives = "|".join(sorted(map(re.escape, roots), key=len, reverse=True))
    dotted = rf"(?<![\w.])(?P<dotted>(?:{alternatives})(?:\.{_IDENT})*)(?::(?P<name>{_IDENT}))?(?![\w])"
    path = rf"(?<![\w./-])(?P<path>(?:{alternatives})(?:/{_IDENT})+)(?P<suffix>\.pyi?|\.c|/)"
    return re.compile(f"{path}|{dotted}")


def _mention(moves: PathMap, match: re.Match[str]) -> tuple[str, bool] | None:
    """A mention rewritten: ``(new text, by a name entry)``, or None when the map does not name it."""
    if match.group("path"):
        moved = moves.module(match.group("path").replace("/", "."))
        return (moved.replace(".", "/") + match.group("suffix"), False) if moved else None
    dotted, name = match.group("dotted"), match.group("name")
    if name is not None:
        new = moves.name(dotted, name)
        return (f"{new}:{name}", (dotted, name) in moves.names) if new is not None else None
    return moves.dotted(dotted)


def _text_ranges(text: str) -> list[tuple[int, int]] | None:
    """The character ranges of a Python source's strings and comments (None: it does not tokenize)."""
    lines = _Lines(text)
    ranges = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type in (tokenize.STRING, tokenize.COMMENT) or tok.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
                start = lines.starts[tok.start[0] - 1] + tok.start[1]
                ranges.append((start, lines.starts[tok.end[0] - 1] + tok.end[1]))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    return ranges


def _rewrite_from_lines(moves: PathMap, text: str) -> str:
    """``from old import a, b`` lines of prose, doctests and code blocks (one line, absolute), split as code is."""

    def replace(match: re.Match[str]) -> str:
        aliases = [(p.split(" as ")[0].strip(), p.split(" as ")[1].strip() if " as " in p else None)
                   for p in match.group("names").split(",")]
        lead = match.group("lead")
        new = rewrite_from(moves, match.group("module"), match.group("module"), aliases, lead)
        return match.group(0) if new is None else "\n".join(lead + s for s in new)

    return _FROM_LINE.sub(replace, text)


def rewrite_mentions(moves: PathMap, text: str, python: bool, where: str, report: Report) -> str:
    """Every mention of a mapped module or name in ``text`` rewritten. In Python source (``python``), a mention
    in code proper (not a string or comment) that a name entry moves is reported, not changed: the module that
    now holds the name is not imported there."""
    text = _rewrite_from_lines(moves, text)
    ranges = _text_ranges(text) if python else None
    pattern = _mention_pattern(moves.roots)
    out, at = [], 0
    for match in pattern.finditer(text):
        new = _mention(moves, match)
        if new is None:
            continue
        if ranges is not None and new[1] and not any(s <= match.start() < e for s, e in ranges):
            line = text.count("\n", 0, match.start()) + 1
            report.warnings.append(f"{where}:{line}: {match.group(0)} is reached through its old module in code: "
                                   f"import it from {new[0].rsplit('.', 1)[0] if ':' not in new[0] else new[0]}")
            continue
        out += [text[at: match.start()], new[0]]
        at = match.end()
    return "".join([*out, text[at:]])


# -- Markdown and the layout tree ---------------------------------------------------------------------------------

_FENCE = re.compile(r"^(?P<open>[ \t]*```(?P<lang>[\w+-]*)[^\n]*\n)(?P<body>.*?)(?P<close>^[ \t]*```)", re.M | re.S)


def rewrite_markdown(moves: PathMap, text: str, where: str, report: Report) -> str:
    """Python code blocks through the import rewriter (when they parse), then every mention."""

    def block(match: re.Match[str]) -> str:
        body = match.group("body")
        if match.group("lang") in ("python", "py", "pycon"):
            try:
                body = _apply(body, _python_edits(moves, body, None, False, where, report))
            except SyntaxError:
                pass  # a fragment (``...``, a doctest): its one-line imports are rewritten with the prose
        return match.group("open") + body + match.group("close")

    return rewrite_mentions(moves, _FENCE.sub(block, text), False, where, report)


def refile_layout(moves: PathMap, text: str) -> str:
    """The ``## Layout`` tree of docs/architecture.md with the line of each moved file under its new folder (new
    folders are added at the end of their parent; folders left empty are dropped)."""
    if "## Layout" not in text:
        return text
    head, rest = text.split("## Layout", 1)
    try:
        before, block, after = rest.split("```", 2)
    except ValueError:
        return text
    first, _, body = block.partition("\n")
    tree: dict[str, list[str]] = {}  # folder path -> its children, in order ("name/" for folders)
    lines: dict[str, str] = {}  # path -> its line
    folders: list[str] = []
    columns = [34]
    for line in body.splitlines():
        if not line.strip():
            continue
        depth = (len(line) - len(line.lstrip(" "))) // 2
        name = line.split()[0]
        del folders[depth:]
        parent = "/".join(folders)
        path = f"{parent}/{name}".lstrip("/")
        tree.setdefault(parent, []).append(name)
        lines[path.rstrip("/")] = line
        if len(line.split(None, 1)) > 1:
            columns.append(len(line) - len(line.split(None, 1)[1]))
        if name.endswith("/"):
            folders.append(name.rstrip("/"))
            tree.setdefault("/".join(folders), [])
    column = max(set(columns), key=columns.count)
    moved = False
    for path in [p for p in lines if p.endswith(".py")]:
        dotted = path[:-3].replace("/", ".")
        target = moves.module(dotted[: -len(".__init__")] if dotted.endswith(".__init__") else dotted)
        if target is None:
            continue
        new_path = target.replace(".", "/") + ("/__init__.py" if dotted.endswith(".__init__") else ".py")
        parent, name = path.rsplit("/", 1)
        new_parent, new_name = new_path.rsplit("/", 1)
        if new_parent == parent:  # renamed in place
            tree[parent][tree[parent].index(name)] = new_name
        else:
            tree[parent].remove(name)
        for i, part in enumerate(new_parent.split("/")):
            above, folder = "/".join(new_parent.split("/")[:i]), part + "/"
            if folder not in tree.get(above, []):
                tree.setdefault(above, []).append(folder)
                tree.setdefault(f"{above}/{part}".lstrip("/"), [])
        if new_parent != parent:
            tree[new_parent].append(new_name)
        description = lines.pop(path).split(None, 1)[1:]
        lines[new_path] = "  " * new_path.count("/") + new_name + (
            " " * max(1, column - len("  " * new_path.count("/") + new_name)) + description[0] if description else "")
        moved = True
    if not moved:
        return text

    def render(folder: str, depth: int) -> Iterator[str]:
        for name in tree.get(folder, []):
            path = f"{folder}/{name}".lstrip("/")
            if name.endswith("/"):
                inner = list(render(path.rstrip("/"), depth + 1))
                if inner:
                    yield lines.get(path.rstrip("/"), "  " * depth + name)
                    yield from inner
            else:
                yield lines[path]

    new_body = "\n".join(render("", 0)) + "\n"
    return head + "## Layout" + before + "```" + first + "\n" + new_body + "```" + after


# -- files --------------------------------------------------------------------------------------------------------

def _built_strings(text: str) -> list[tuple[int, str]]:
    """The f-strings of a module whose fields are module-level string constants, filled in (``f"{_PKG}.mod:X"``):
    mentions the rewrite cannot reach."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    constants = {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign)
                 and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)
                 for t in n.targets if isinstance(t, ast.Name)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr) and any(isinstance(v, ast.FormattedValue) for v in node.values):
            parts = [str(v.value) if isinstance(v, ast.Constant) else constants.get(getattr(v.value, "id", ""), "")
                     for v in node.values]
            found.append((node.lineno, "".join(parts)))
    return found


def module_of(path: Path, root: Path, packages: Iterable[str]) -> tuple[str | None, bool]:
    """The dotted module a Python file is (for its relative imports), and whether it is a package's __init__."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    for package in packages:
        if package in parts:
            parts = parts[parts.index(package):]
            is_package = parts[-1] == "__init__"
            return ".".join(parts[:-1] if is_package else parts), is_package
    return None, False


def rewrite_file(moves: PathMap, path: Path, root: Path, report: Report) -> str | None:
    """The new text of ``path``, or None when nothing changes."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return None
    where = path.relative_to(root).as_posix()
    if path.suffix in (".py", ".pyi"):
        here, is_package = module_of(path, root, moves.roots)
        try:
            new = _apply(text, _python_edits(moves, text, here, is_package, where, report))
        except SyntaxError:
            new = text
            report.warnings.append(f"{where}: does not parse; only its mentions were rewritten")
        new = rewrite_mentions(moves, new, True, where, report)
        pattern = _mention_pattern(moves.roots)
        for line, value in _built_strings(new):
            if any(_mention(moves, m) for m in pattern.finditer(value)):
                report.warnings.append(f"{where}:{line}: the f-string {value!r} names what the map moves: edit "
                                       f"by hand")
    elif path.suffix == ".md":
        new = rewrite_markdown(moves, refile_layout(moves, text) if where == LAYOUT_DOC else text, where, report)
    else:
        new = rewrite_mentions(moves, text, False, where, report)
    return None if new == text else new


def files_under(root: Path, paths: Iterable[str]) -> Iterator[Path]:
    for name in paths:
        path = (root / name).resolve()
        if not path.exists():
            continue
        candidates = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file()
                                                           and p.suffix in SUFFIXES)
        for file in candidates:
            relative = file.relative_to(root).as_posix()
            if SKIPPED_DIRS.intersection(file.relative_to(root).parts) or relative.startswith(EXCLUDED):
                continue
            if any(part.endswith(".egg-info") for part in file.relative_to(root).parts):
                continue
            yield file


def unresolved_mentions(text: str, where: str, roots: set[str], index: ModuleIndex) -> list[str]:
    """Dotted mentions of the map's packages that name no module and no name a module binds."""
    found = []
    pattern = _mention_pattern(roots)
    for match in pattern.finditer(text):
        if match.group("path"):
            continue
        parts = match.group("dotted").split(".")
        name = match.group("name")
        known = next((i for i in range(len(parts), 0, -1) if index.exists(".".join(parts[:i]))), 0)
        module = ".".join(parts[:known])
        if not known:
            ok = False
        elif module in index.extensions or (known < len(parts) and parts[known].startswith("__")):
            ok = True  # a compiled module's names are not read; module attributes (__file__) always exist
        elif name is not None:
            ok = known == len(parts) and name in index.bound(".".join(parts))
        else:
            ok = known == len(parts) or parts[known] in index.bound(".".join(parts[:known]))
        if not ok:
            line = text.count("\n", 0, match.start()) + 1
            found.append(f"{where}:{line}: {match.group(0)}")
    return found


def run_ruff(root: Path, files: list[Path]) -> None:
    python_files = [str(f) for f in files if f.suffix in (".py", ".pyi")]
    if not python_files:
        return
    ruff = shutil.which("ruff")
    command = [ruff] if ruff else [sys.executable, "-m", "ruff"]
    subprocess.run([*command, "check", "--fix", "--quiet", "--select", "I,F401", *python_files], cwd=root,
                   check=False)


def relocate(moves: PathMap, root: Path, paths: Iterable[str], *, write: bool = True, ruff: bool = True,
             check: bool = True) -> Report:
    """Apply ``moves`` under ``root`` (see the module); raises MapError before writing anything when the map
    does not match the tree."""
    index = ModuleIndex(root, moves.roots)
    if check:
        problems = check_map(moves, index)
        if problems:
            raise MapError("the map does not match the tree:\n  " + "\n  ".join(problems))
    report = Report()
    changed: list[Path] = []
    for path in files_under(root, paths):
        new = rewrite_file(moves, path, root, report)
        text = new if new is not None else path.read_text(encoding="utf-8", errors="replace")
        if new is not None:
            old = path.read_text(encoding="utf-8")
            report.changed[path] = sum(1 for line in difflib.ndiff(old.splitlines(), new.splitlines())
                                       if line.startswith("+ "))
            changed.append(path)
            if write:
                path.write_text(new, encoding="utf-8")
        report.unresolved += unresolved_mentions(text, path.relative_to(root).as_posix(), moves.roots, index)
    if write and ruff:
        run_ruff(root, changed)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--map", type=Path, help="a JSON object {old: new}")
    parser.add_argument("--entry", action="append", default=[], metavar="OLD=NEW", help="a map entry (repeatable)")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--dry-run", action="store_true", help="say what would change, write nothing")
    parser.add_argument("--no-ruff", action="store_true", help="do not sort imports with ruff afterwards")
    parser.add_argument("--no-check", action="store_true", help="do not check the map against the tree")
    parser.add_argument("paths", nargs="*", help=f"files and folders (default: {' '.join(DEFAULT_PATHS)})")
    args = parser.parse_args(argv)
    entries: dict[str, str] = json.loads(args.map.read_text(encoding="utf-8")) if args.map else {}
    entries.update(e.split("=", 1) for e in args.entry)  # type: ignore[misc]
    root = args.root.resolve()
    try:
        moves = PathMap.parse(entries)
        report = relocate(moves, root, args.paths or DEFAULT_PATHS, write=not args.dry_run, ruff=not args.no_ruff,
                          check=not args.no_check)
    except MapError as exc:
        print(f"relocate: {exc}", file=sys.stderr)
        return 2
    for path, lines in sorted(report.changed.items()):
        print(f"{'would change' if args.dry_run else 'changed'} {path.relative_to(root).as_posix()} ({lines} lines)")
    for warning in report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    for mention in report.unresolved:
        print(f"unresolved: {mention}", file=sys.stderr)
    print(f"{len(report.changed)} files {'to change' if args.dry_run else 'changed'}, {len(report.warnings)} "
          f"warnings, {len(report.unresolved)} unresolved mentions")
    return 1 if report.warnings else 0


if __name__ == "__main__":
    sys.exit(main())
