"""evret_core.contracts is the floor: its modules import nothing of evret_core outside contracts, at module level,
inside functions or under ``if TYPE_CHECKING:`` alike (read with ``ast``, without importing anything); at module
level they import only the standard library and pluggy, never numpy (imported inside the functions that compute) nor
pydantic (the value types are dataclasses); importing any of them loads neither, nor asyncio (``run_sync`` imports it
when it runs a coroutine) nor sqlite3."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONTRACTS = ROOT / "evret_core" / "contracts"


def _module_name(path: Path) -> str:
    parts = ["evret_core", *path.relative_to(ROOT / "evret_core").with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported_modules(source: str, name: str, is_package: bool) -> list[tuple[int, str]]:
    """``(line, module)`` for every import statement anywhere in ``source`` (the module ``name``), relative ones
    made absolute; ``from pkg import x`` gives ``pkg.x`` (the submodule ``x``, or a name of ``pkg``: either way
    inside ``pkg``)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):  # every depth: functions and TYPE_CHECKING blocks included
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, module] if module else base)
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
    return found


def _outside_contracts(source: str, name: str, is_package: bool = False) -> list[str]:
    """The imports of ``source`` that reach evret_core outside ``evret_core.contracts``."""
    return [f"{name}:{line}: {module}" for line, module in _imported_modules(source, name, is_package)
            if (module == "evret_core" or module.startswith("evret_core."))
            and module != "evret_core.contracts" and not module.startswith("evret_core.contracts.")]


def test_the_scan_sees_every_level_of_import() -> None:
    source = textwrap.dedent("""
        from typing import TYPE_CHECKING
        import evret_core.contracts
        from evret_core.contracts import errors
        from .errors import EvretError
        from . import aio
        if TYPE_CHECKING:
            from evret_core.plugins.registry import Registry
        def f():
            import evret_core.judge.resolve
            from .. import version
            from evret_core import __version__
        """)
    assert _outside_contracts(source, "evret_core.contracts.x") == [
        "evret_core.contracts.x:8: evret_core.plugins.registry.Registry",
        "evret_core.contracts.x:10: evret_core.judge.resolve",
        "evret_core.contracts.x:11: evret_core.version",
        "evret_core.contracts.x:12: evret_core.__version__",
    ]
    assert _outside_contracts("from . import errors\nfrom .. import sdk\n", "evret_core.contracts", True) == [
        "evret_core.contracts:2: evret_core.sdk"]


def test_contracts_import_nothing_of_evret_core_outside_contracts() -> None:
    paths = sorted(CONTRACTS.rglob("*.py"))
    assert {p.name for p in paths} >= {"__init__.py", "errors.py", "aio.py", "judge.py", "retrieve.py", "metric.py",
                                       "output.py"}
    found = [hit for p in paths for hit in _outside_contracts(p.read_text(encoding="utf-8"), _module_name(p),
                                                              p.name == "__init__.py")]
    assert found == []


def test_run_sync_imports_asyncio_only_when_it_runs_a_coroutine() -> None:
    code = textwrap.dedent("""
        import sys
        from evret_core.contracts.aio import run_sync
        assert "asyncio" not in sys.modules, "importing run_sync loaded asyncio"
        async def answer():
            return 42
        assert run_sync(answer()) == 42
        assert "asyncio" in sys.modules
        """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]


ALLOWED_PACKAGES = {"pluggy"}  # the hooks' markers; everything else at module level is stdlib or contracts


def _module_level_imports(source: str, name: str) -> list[tuple[int, str]]:
    """``(line, module)`` of every import that runs when the module ``name`` is imported (relative ones made
    absolute; ``from pkg import x`` gives ``pkg.x``): module level and module-level ``if``/``try`` blocks, but not ``if TYPE_CHECKING:`` and not inside
    functions or classes."""
    found: list[tuple[int, str]] = []
    stack = list(ast.parse(source).body)
    while stack:
        node = stack.pop(0)
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):  # ``from pkg import x``: ``pkg.x`` (a submodule or a name of pkg)
            base = name.split(".")[: len(name.split(".")) - node.level] if node.level else []
            module = ".".join([*base, node.module] if node.module else base)
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
        elif isinstance(node, ast.If):
            test = node.test
            type_checking = (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
                isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
            stack += node.orelse if type_checking else [*node.body, *node.orelse]
        elif isinstance(node, ast.Try):
            stack += [*node.body, *node.orelse, *node.finalbody, *(s for h in node.handlers for s in h.body)]
    return found


def test_the_module_level_scan_skips_functions_and_type_checking() -> None:
    source = textwrap.dedent("""
        from __future__ import annotations
        import json
        from typing import TYPE_CHECKING
        from pydantic import BaseModel
        from .errors import EvretError
        if TYPE_CHECKING:
            import numpy as np
        else:
            import pluggy
        try:
            import numpy.linalg
        except ImportError:
            pass
        def f():
            import numpy as np
        class C:
            import pandas
        """)
    assert _module_level_imports(source, "evret_core.contracts.x") == [
        (2, "__future__.annotations"), (3, "json"), (4, "typing.TYPE_CHECKING"), (5, "pydantic.BaseModel"),
        (6, "evret_core.contracts.errors.EvretError"), (10, "pluggy"), (12, "numpy.linalg")]


def _contracts_modules() -> dict[str, list[tuple[int, str]]]:
    """Every contracts module and its module-level imports."""
    return {_module_name(p): _module_level_imports(p.read_text(encoding="utf-8"), _module_name(p))
            for p in sorted(CONTRACTS.rglob("*.py"))}


def test_contracts_import_only_the_standard_library_and_pluggy_at_module_level() -> None:
    found = [f"{name}:{line}: {module}" for name, imports in _contracts_modules().items() for line, module in imports
             if module.split(".")[0] not in sys.stdlib_module_names | ALLOWED_PACKAGES | {"evret_core"}]
    assert found == [], "contracts import at module level what they may not (numpy goes inside the functions, " \
        "pydantic stays where files are read):\n" + "\n".join(found)


HEAVY = ("numpy", "pydantic", "pydantic_core", "asyncio", "sqlite3", "_sqlite3")


def test_importing_each_contracts_module_loads_nothing_heavy() -> None:
    """``python -X importtime -c "import evret_core.contracts.<each>"``, one process per module: no numpy, pydantic,
    asyncio or sqlite3 among the modules it imports."""
    names = list(_contracts_modules())
    assert {"evret_core.contracts.metric", "evret_core.contracts.retrieve", "evret_core.contracts.generation",
            "evret_core.contracts.judge", "evret_core.contracts.output", "evret_core.contracts.aio"} <= set(names)
    found = []
    for name in names:
        done = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {name}"], capture_output=True,
                              text=True, cwd=ROOT, timeout=60)
        assert done.returncode == 0, done.stderr[-2000:]
        imported = [line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()
                    if line.startswith("import time:") and "|" in line]
        assert name in imported, f"{name} not in its own import times"
        found += [f"{name}: {m}" for m in imported if m.split(".")[0] in HEAVY]
    assert found == [], "importing a contracts module loaded:\n" + "\n".join(found)
