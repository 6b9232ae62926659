"""The plugin author's docs show one way of doing each thing and describe the house as it is.

- Every ``register(...)`` call in a python block of docs/writing-a-plugin.md and docs/hooks.md (and in the example
  plugin) passes a class defined in its block, or ``lazy("package.module:Name")`` naming a class that exists: one
  factory style.
- The example plugin, docs/examples/evret-judge-keywords, is one module.
- docs/architecture.md and docs/writing-a-plugin.md carry no change history (a short deny list of the phrases that
  tell one).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import tomllib

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
EXAMPLE = DOCS / "examples" / "evret-judge-keywords"
LAZY_TARGET = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*")


def python_blocks(text: str) -> list[str]:
    """The bodies of the fenced ```python blocks of a markdown text."""
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)


def _lazy_class_exists(target: str) -> bool:
    """Whether ``package.module:Name`` names a class defined in that module of the core, a plugin or the example."""
    module, name = target.split(":")
    relative = Path(*module.split("."))
    roots = [REPO, EXAMPLE, *(p for p in (REPO / "plugins").iterdir() if p.is_dir())]
    for root in roots:
        for path in (root / relative.with_suffix(".py"), root / relative / "__init__.py"):
            if path.is_file():
                tree = ast.parse(path.read_text(encoding="utf-8"))
                return any(isinstance(n, ast.ClassDef) and n.name == name for n in tree.body)
    return False


def registration_problems(source: str, where: str) -> tuple[int, list[str]]:
    """``(registrations, problems)``: how many ``register(name, factory)`` calls ``source`` makes, and those whose
    factory is neither a class defined in ``source`` nor ``lazy("pkg.mod:Name")`` of an existing class."""
    tree = ast.parse(source)
    classes = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    count, problems = 0, []
    for call in ast.walk(tree):
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "register"):
            continue
        count += 1
        factory = call.args[1] if len(call.args) == 2 and not call.keywords else None
        if isinstance(factory, ast.Name) and factory.id in classes:
            continue
        if isinstance(factory, ast.Call) and isinstance(factory.func, ast.Name) and factory.func.id == "lazy" \
                and len(factory.args) == 1 and isinstance(factory.args[0], ast.Constant) \
                and isinstance(factory.args[0].value, str) and LAZY_TARGET.fullmatch(factory.args[0].value) \
                and _lazy_class_exists(factory.args[0].value):
            continue
        problems.append(f"{where}:{call.lineno}: {ast.unparse(call)}")
    return count, problems


def test_the_registration_check_tells_the_styles_apart() -> None:
    source = (
        "class A: ...\n"
        "def make(): return A()\n"
        "register('a', A)\n"
        "register('b', lazy('evret_judge_keywords:KeywordJudge'))\n"
        "register('c', lazy('evret_chroma.retriever:ChromaRetriever', default_model='m'))\n"
        "register('d', make)\n"
        "register('e', lambda **o: A())\n"
        "register('f', lazy('evret_chroma.retriever:NoSuchClass'))\n"
        "register('g', lazy('evret_chroma.retriever'))\n"
        "register('h', factory=A)\n"
    )
    count, problems = registration_problems(source, "x")
    assert count == 8
    assert [p.split(":")[1] for p in problems] == ["6", "7", "8", "9", "10"]


@pytest.mark.parametrize("doc", ["writing-a-plugin.md", "hooks.md"])
def test_every_registration_in_the_docs_passes_a_class_or_lazy(doc: str) -> None:
    count, problems = 0, []
    for i, block in enumerate(python_blocks((DOCS / doc).read_text(encoding="utf-8"))):
        found, bad = registration_problems(block, f"{doc} python block {i + 1}")
        count, problems = count + found, problems + bad
    assert count >= {"writing-a-plugin.md": 3, "hooks.md": 11}[doc]
    assert problems == [], "register a class or lazy('package.module:Name'):\n" + "\n".join(problems)


def test_the_example_plugin_registers_a_class() -> None:
    source = (EXAMPLE / "evret_judge_keywords" / "__init__.py").read_text(encoding="utf-8")
    count, problems = registration_problems(source, "evret_judge_keywords/__init__.py")
    assert (count, problems) == (1, [])


def test_the_example_plugin_is_one_module() -> None:
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["entry-points"]["evret"] == {"evret-judge-keywords": "evret_judge_keywords"}
    modules = sorted(p.relative_to(EXAMPLE).as_posix() for p in EXAMPLE.rglob("*.py") if "__pycache__" not in p.parts)
    assert modules == ["evret_judge_keywords/__init__.py", "tests/test_keywords.py"]


CHANGE_HISTORY = re.compile(
    r"until this release|\bused to\b|\bno longer\b|\bmoved\b|\bold path|\bbefore,|\bformerly\b|\brenamed\b|"
    r"\bany ?more\b|\bpreviously\b|\bdeprecated\b|\bnow\b", re.IGNORECASE)


def change_history(text: str) -> list[str]:
    """``line: text`` of every line of ``text`` that tells what changed rather than what is."""
    return [f"{i}: {line.strip()}" for i, line in enumerate(text.splitlines(), 1) if CHANGE_HISTORY.search(line)]


def test_the_deny_list_finds_change_history() -> None:
    text = ("The judge lives in contracts.\nIt used to live in judge/base.py.\nThe helper moved to io/.\n"
            "Before, the SDK was lazy; it is now eager.\nNothing imports the old path any more.\n"
            "The function removed the fences and is used by the CLI.\n")
    assert [hit.split(":")[0] for hit in change_history(text)] == ["2", "3", "4", "5"]


@pytest.mark.parametrize("doc", ["architecture.md", "writing-a-plugin.md"])
def test_the_house_docs_carry_no_change_history(doc: str) -> None:
    found = change_history((DOCS / doc).read_text(encoding="utf-8"))
    assert found == [], f"docs/{doc} describes the present, not what changed:\n" + "\n".join(found)
