""".ci/relocate.py, the reference rewriter of issue 34's moves, on a fixture tree (package ``acme``) holding every
form a reference takes: ``import a.b [as x]``, ``from a import b``, ``from a.b import c as d``, parenthesised and
relative imports, imports in functions and under ``if TYPE_CHECKING:``, lazy tables, ``"pkg.mod:Name"`` strings,
``mock.patch`` targets, docstrings, comments, Markdown prose and code blocks, the layout tree. The whole tree is
compared with what it must become: only what the map names changes, and a second run changes nothing."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("evret_relocate", REPO / ".ci" / "relocate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


relocate = _tool()

# the map of the fixture's moves: one name out of a module that stays, and one module moved and renamed
MAP = {"acme.old.models:Widget": "acme.core.widget", "acme.util.text": "acme.core.strings"}

# the tree after the code was moved by hand (Widget cut from old/models.py, util/text.py now core/strings.py),
# before the references are rewritten
BEFORE = {
    "acme/__init__.py": '''
        """acme: Widget is imported on first use."""
        _EXPORTS = {"Widget": "acme.old.models", "Gadget": "acme.old.models", "helper": "acme.util.text",
                    "fancy": "acme.util.textual"}


        def __getattr__(name):
            import importlib

            return getattr(importlib.import_module(_EXPORTS[name]), name)
        ''',
    "acme/old/__init__.py": '"""Old things."""\n',
    "acme/old/models.py": '''
        """Gadgets (Widget moved to acme.core.widget)."""


        class Gadget:
            pass
        ''',
    "acme/old/user.py": '''
        from .models import Widget, Gadget
        from . import models
        ''',
    "acme/core/__init__.py": '"""The core."""\n',
    "acme/core/widget.py": 'class Widget:\n    pass\n',
    "acme/core/strings.py": 'def helper():\n    return "h"\n\n\ndef main():\n    return 0\n',
    "acme/util/__init__.py": '"""Utilities."""\n',
    "acme/util/textual.py": 'def fancy():\n    return "f"\n',
    "acme/consumer.py": '''
        """Uses acme.old.models.Widget (see :class:`~acme.old.models.Widget`) and acme.util.text.helper;
        acme.util.textual and acme.old.models.Gadget stay where they are."""

        from __future__ import annotations

        import acme.util.text
        import acme.util.text as t
        import acme.util.textual
        from typing import TYPE_CHECKING

        from acme.old import models
        from acme.old.models import Gadget, Widget as W
        from acme.old.models import (
            Gadget as G2,
            Widget,
        )
        from acme.util import text, textual
        from acme.util.text import helper as h

        if TYPE_CHECKING:
            from acme.old.models import Widget as TW

        TARGET = "acme.old.models:Widget"  # a lazy target, as an entry point writes it
        OTHER = "acme.old.models:Gadget"
        RUNNER = "acme.util.text:main"
        LAZY = {"Widget": "acme.old.models", "Gadget": "acme.old.models"}


        def late():
            from acme.old.models import Widget, Gadget
            import acme.util.text

            return acme.util.text.helper(), Widget, Gadget, t, text, textual, h, W, G2, models


        def chained():
            return acme.old.models.Widget
        ''',
    "tests/test_acme.py": '''
        from unittest import mock

        import acme.old.models


        def test_patched(monkeypatch):
            monkeypatch.setattr("acme.util.text.helper", lambda: "x")
            with mock.patch("acme.old.models.Widget") as widget, mock.patch("acme.old.models.Gadget"):
                assert widget
        ''',
    "docs/guide.md": '''
        # Guide

        Build a `acme.old.models.Widget` (the code is in `acme/util/text.py`; `acme/util/textual.py` stays):

        ```python
        from acme.old.models import Gadget, Widget
        from acme.util.text import helper

        widget = Widget()
        ```

        ```pycon
        >>> from acme.old.models import Widget
        >>> ...
        ```

        The entry point is `acme.util.text:main`; `acme.util.textual.fancy` and `acme.old.models.Gadget` stay.
        ''',
    "docs/architecture.md": '''
        # Architecture

        ## Layout

        ```
        acme/
          __init__.py       The package
          consumer.py       Uses everything
          old/
            __init__.py     Old things
            models.py       Gadgets
            user.py         Relative imports
          util/
            __init__.py     Utilities
            text.py         Text helpers
            textual.py      Textual things
        ```

        The end.
        ''',
    "pyproject.toml": '''
        [project.scripts]
        acme = "acme.util.text:main"
        ''',
}

AFTER = {
    "acme/__init__.py": '''
        """acme: Widget is imported on first use."""
        _EXPORTS = {"Widget": "acme.core.widget", "Gadget": "acme.old.models", "helper": "acme.core.strings",
                    "fancy": "acme.util.textual"}


        def __getattr__(name):
            import importlib

            return getattr(importlib.import_module(_EXPORTS[name]), name)
        ''',
    "acme/old/user.py": '''
        from acme.core.widget import Widget
        from .models import Gadget
        from . import models
        ''',
    "acme/consumer.py": '''
        """Uses acme.core.widget.Widget (see :class:`~acme.core.widget.Widget`) and acme.core.strings.helper;
        acme.util.textual and acme.old.models.Gadget stay where they are."""

        from __future__ import annotations

        import acme.core.strings
        import acme.core.strings as t
        import acme.util.textual
        from typing import TYPE_CHECKING

        from acme.old import models
        from acme.old.models import Gadget
        from acme.core.widget import Widget as W
        from acme.old.models import Gadget as G2
        from acme.core.widget import Widget
        from acme.core import strings as text
        from acme.util import textual
        from acme.core.strings import helper as h

        if TYPE_CHECKING:
            from acme.core.widget import Widget as TW

        TARGET = "acme.core.widget:Widget"  # a lazy target, as an entry point writes it
        OTHER = "acme.old.models:Gadget"
        RUNNER = "acme.core.strings:main"
        LAZY = {"Widget": "acme.core.widget", "Gadget": "acme.old.models"}


        def late():
            from acme.core.widget import Widget
            from acme.old.models import Gadget
            import acme.core.strings

            return acme.core.strings.helper(), Widget, Gadget, t, text, textual, h, W, G2, models


        def chained():
            return acme.old.models.Widget
        ''',
    "tests/test_acme.py": '''
        from unittest import mock

        import acme.old.models


        def test_patched(monkeypatch):
            monkeypatch.setattr("acme.core.strings.helper", lambda: "x")
            with mock.patch("acme.core.widget.Widget") as widget, mock.patch("acme.old.models.Gadget"):
                assert widget
        ''',
    "docs/guide.md": '''
        # Guide

        Build a `acme.core.widget.Widget` (the code is in `acme/core/strings.py`; `acme/util/textual.py` stays):

        ```python
        from acme.old.models import Gadget
        from acme.core.widget import Widget
        from acme.core.strings import helper

        widget = Widget()
        ```

        ```pycon
        >>> from acme.core.widget import Widget
        >>> ...
        ```

        The entry point is `acme.core.strings:main`; `acme.util.textual.fancy` and `acme.old.models.Gadget` stay.
        ''',
    "docs/architecture.md": '''
        # Architecture

        ## Layout

        ```
        acme/
          __init__.py       The package
          consumer.py       Uses everything
          old/
            __init__.py     Old things
            models.py       Gadgets
            user.py         Relative imports
          util/
            __init__.py     Utilities
            textual.py      Textual things
          core/
            strings.py      Text helpers
        ```

        The end.
        ''',
    "pyproject.toml": '''
        [project.scripts]
        acme = "acme.core.strings:main"
        ''',
}


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")


def _tree(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text(encoding="utf-8") for p in sorted(root.rglob("*"))
            if p.is_file()}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    _write(tmp_path, BEFORE)
    return tmp_path


def _run(root: Path, **options: object) -> object:
    return relocate.relocate(relocate.PathMap.parse(MAP), root, ["acme", "tests", "docs", "pyproject.toml"],
                             ruff=False, **options)


def test_every_form_is_rewritten_and_nothing_else(tree: Path) -> None:
    report = _run(tree)
    expected = _tree(tree) | {k: textwrap.dedent(v).lstrip("\n") for k, v in AFTER.items()}
    got = _tree(tree)
    for name in expected:
        assert got[name] == expected[name], name
    untouched = set(BEFORE) - set(AFTER)
    assert {p.relative_to(tree).as_posix() for p in report.changed} == set(AFTER)
    assert all(got[name] == textwrap.dedent(BEFORE[name]).lstrip("\n") for name in untouched)
    # the one reference it cannot rewrite: a moved name reached through its old module in code
    assert report.warnings == ["acme/consumer.py:38: acme.old.models.Widget is reached through its old module in "
                               "code: import it from acme.core.widget"]


def test_a_second_run_changes_nothing(tree: Path) -> None:
    _run(tree)
    once = _tree(tree)
    report = _run(tree)
    assert report.changed == {} and _tree(tree) == once


def test_the_rewritten_code_imports(tree: Path) -> None:
    _run(tree)
    (tree / "acme" / "consumer.py").write_text((tree / "acme" / "consumer.py").read_text().replace(
        "acme.old.models.Widget\n", "acme.core.widget.Widget\n"), encoding="utf-8")  # the hand edit it asked for
    code = ("import acme, acme.consumer as c, acme.old.user\n"
            "print(acme.Widget.__module__, acme.helper(), c.late()[0], c.chained().__name__, c.RUNNER)")
    done = subprocess.run([sys.executable, "-c", code], cwd=tree, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["acme.core.widget", "h", "h", "Widget", "acme.core.strings:main"]


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff is not installed")
def test_ruff_then_sorts_the_imports_it_split(tree: Path) -> None:
    (tree / "pyproject.toml").write_text('[tool.ruff.lint]\nselect = ["I", "F401"]\n', encoding="utf-8")
    relocate.relocate(relocate.PathMap.parse(MAP), tree, ["acme"])
    done = subprocess.run(["ruff", "check", "acme"], cwd=tree, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout
    consumer = (tree / "acme" / "consumer.py").read_text(encoding="utf-8")
    assert "from acme.core.widget import Widget as W\nfrom acme.old import models\n" in consumer
    assert "acme.old.models import Widget" not in consumer


def test_a_map_that_does_not_match_the_moved_code_is_refused_before_any_write(tree: Path) -> None:
    before = _tree(tree)
    cases = {
        "acme.old.models:Gadget": ("acme.core.widget", "acme.core.widget does not define Gadget"),
        "acme.old.models:Widget": ("acme.core.strings", "acme.core.strings does not define Widget"),
        "acme.util.textual": ("acme.core.fancy", "there is no module acme.core.fancy"),
        "acme.core.widget": ("acme.util.textual", "acme.core.widget still exists"),
    }
    for old, (new, message) in cases.items():
        with pytest.raises(relocate.MapError, match=message):
            relocate.relocate(relocate.PathMap.parse({old: new}), tree, ["acme"], ruff=False)
    (tree / "acme" / "old" / "models.py").write_text("class Gadget: ...\nclass Widget: ...\n", encoding="utf-8")
    with pytest.raises(relocate.MapError, match="acme.old.models still defines Widget"):
        relocate.relocate(relocate.PathMap.parse(MAP), tree, ["acme"], ruff=False)
    assert _tree(tree) == before | {"acme/old/models.py": "class Gadget: ...\nclass Widget: ...\n"}


def test_a_map_that_moves_a_destination_again_is_refused() -> None:
    with pytest.raises(relocate.MapError, match="is itself moved"):
        relocate.PathMap.parse({"a.b": "a.c", "a.c": "a.d"})
    with pytest.raises(relocate.MapError, match="is itself moved"):
        relocate.PathMap.parse({"a.b": "a.b.inner"})
    with pytest.raises(relocate.MapError, match="expected"):
        relocate.PathMap.parse({"a.b:C": "a.c:C"})


def test_mentions_that_resolve_to_nothing_are_reported(tree: Path) -> None:
    _write(tree, {"docs/stale.md": "See `acme.old.models.Sprocket`, `acme.gone` and `acme.util.textual.fancy`.\n"})
    report = _run(tree)
    stale = [u for u in report.unresolved if u.startswith("docs/stale.md")]
    assert stale == ["docs/stale.md:1: acme.old.models.Sprocket", "docs/stale.md:1: acme.gone"]


def test_the_command_line(tree: Path) -> None:
    (tree / "moves.json").write_text('{"acme.old.models:Widget": "acme.core.widget"}', encoding="utf-8")
    done = subprocess.run([sys.executable, str(REPO / ".ci" / "relocate.py"), "--map", "moves.json", "--entry",
                           "acme.util.text=acme.core.strings", "--root", ".", "--no-ruff", "--dry-run", "acme",
                           "docs"], cwd=tree, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1  # the warning about acme.old.models.Widget in code
    assert "would change acme/consumer.py" in done.stdout and "5 files to change" in done.stdout
    assert _tree(tree) == {k: textwrap.dedent(v).lstrip("\n") for k, v in BEFORE.items()} | {
        "moves.json": '{"acme.old.models:Widget": "acme.core.widget"}'}


def test_an_f_string_naming_a_moved_module_is_reported_not_rewritten(tree: Path) -> None:
    table = 'PKG = "acme.util"\nTARGETS = {"main": f"{PKG}.text:main", "fancy": f"{PKG}.textual:fancy"}\n'
    _write(tree, {"acme/table.py": table})
    report = _run(tree)
    assert (tree / "acme" / "table.py").read_text(encoding="utf-8") == table
    assert "acme/table.py:2: the f-string 'acme.util.text:main' names what the map moves: edit by hand" in \
        report.warnings
    assert not any("textual" in w for w in report.warnings)
