"""The one table of kinds (evret_core.contracts.kinds): the registry, the hooks, ``evret plugins``, docs/hooks.md, the
conformance suites (``evret_core.testing.SUITES``) and the ``create_*`` functions all derive from it, each row's base is a
class of evret_core.contracts, each hook is typed ``Register[<base>]``, and adding a row is what makes a new kind
known."""

from __future__ import annotations

import argparse
import inspect
import re
import sys
from dataclasses import FrozenInstanceError
from typing import get_type_hints

import pytest

import evret_core.testing
from evret_core.cli import plugins_cmd
from evret_core.contracts import hooks, kinds
from evret_core.contracts.kinds import KINDS, Kind
from evret_core.plugins import registry
from evret_core.plugins.loading import get_registry, register_plugin
from evret_core.testing import SUITES

from .._paths import REPO


def test_kinds_are_frozen_and_unique() -> None:
    assert len({k.name for k in KINDS}) == len({k.hook for k in KINDS}) == len({k.label for k in KINDS}) == len(KINDS)
    with pytest.raises(FrozenInstanceError):
        kinds.JUDGE.name = "other"  # type: ignore[misc]


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_every_kind_has_its_hookspec_base_and_create_function(kind: Kind[object]) -> None:
    assert hasattr(getattr(hooks, kind.hook), f"{hooks.PROJECT_NAME}_spec"), f"no hookspec {kind.hook}"
    # the base is the class itself, defined in evret_core.contracts (not re-exported from elsewhere)
    assert isinstance(kind.base, type) and kind.base.__module__.startswith("evret_core.contracts.")
    assert getattr(sys.modules[kind.base.__module__], kind.base.__qualname__) is kind.base
    create = getattr(registry, f"create_{kind.name}")
    # the public create_* returns the kind's base type (annotations are strings under `from __future__`)
    assert inspect.signature(create).return_annotation == kind.base.__name__
    assert get_type_hints(create)["return"] is kind.base
    assert getattr(registry, f"{kind.name}_names")() == get_registry().names(kind.name)


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_every_hook_is_typed_by_its_kinds_base(kind: Kind[object]) -> None:
    """``register_judges(register: Register[Judge])``: a factory of anything else is a type error."""
    spec = getattr(hooks, kind.hook)
    assert inspect.signature(spec).parameters["register"].annotation == f"Register[{kind.base.__name__}]"
    assert get_type_hints(spec)["register"] == hooks.Register[kind.base]


def test_every_kind_has_a_conformance_suite() -> None:
    assert list(SUITES) == list(KINDS)
    for kind, suite in SUITES.items():
        assert isinstance(suite, type) and any(name.startswith("test_") for name in dir(suite)), kind.name
        assert getattr(evret_core.testing, suite.__name__) is suite


def test_the_hookspecs_come_in_the_tables_order() -> None:
    specs = [name for name, obj in vars(hooks).items() if hasattr(obj, f"{hooks.PROJECT_NAME}_spec")]
    assert specs == list(hooks.HOOK_NAMES) == [*(k.hook for k in KINDS), *kinds.OTHER_HOOKS]


def test_hook_names_and_registry_tables_come_from_the_table() -> None:
    assert hooks.HOOK_NAMES == (*(k.hook for k in KINDS), *kinds.OTHER_HOOKS)
    reg = get_registry()
    reg.ensure_loaded()
    assert list(reg._tables) == [k.name for k in KINDS]


def test_docs_list_the_hooks_in_the_tables_order() -> None:
    text = (REPO / "docs" / "hooks.md").read_text(encoding="utf-8")
    assert re.findall(r"^## (\w+)\s*$", text, flags=re.MULTILINE) == list(hooks.HOOK_NAMES)


def test_create_is_typed_by_kind_and_builds_the_registered_object() -> None:
    judge = registry.create(kinds.JUDGE, "exact")
    assert isinstance(judge, kinds.JUDGE.base) and registry.recipe(judge) == registry.Recipe("judge", "exact", {})
    metric = registry.create_metric("ndcg@10")
    assert isinstance(metric, kinds.METRIC.base) and metric.name == "ndcg@10"


def test_a_row_added_to_the_table_is_a_kind_everywhere(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """Registry, create() and ``evret plugins`` need nothing but the row (and its hookspec) for a new kind."""
    widget: Kind[object] = Kind("widget", "register_widgets", object, "widgets")
    monkeypatch.setattr(kinds, "KINDS", (*KINDS, widget))
    monkeypatch.setitem(kinds.BY_NAME, "widget", widget)

    class Specs:
        @hooks.hookspec
        def register_widgets(self, register: hooks.Register[object]) -> None:
            """Register widgets."""

    class Plugin:
        @hooks.hookimpl
        def register_widgets(self, register: hooks.Register[object]) -> None:
            register("knob", dict)

    get_registry().pm.add_hookspecs(Specs)
    register_plugin(Plugin(), name="widget-maker")
    assert registry.create(widget, "knob", size=2) == {"size": 2}
    assert registry.names(widget) == ["knob"]
    assert plugins_cmd.run(argparse.Namespace(all=False, json=False)) == 0
    assert "widget-maker\n  widgets: knob\n" in capsys.readouterr().out


def test_architecture_docs_table_is_the_table() -> None:
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (\w+) \| (register_\w+) \| ([\w.:]+) \| ([\w ]+?) \| ([\w.:]*) ?\|$", text, flags=re.MULTILINE)
    assert rows == [(k.name, k.hook, f"{k.base.__module__}:{k.base.__qualname__}", k.label,
                     f"evret_core.testing:{SUITES[k].__name__}") for k in KINDS]
