"""The one table of kinds (evret_core.plugins.kinds): the registry, the hooks, ``evret plugins``, docs/hooks.md and the
``create_*`` functions all derive from it, and adding a row is what makes a new kind known."""

from __future__ import annotations

import argparse
import inspect
import re
from dataclasses import FrozenInstanceError

import pytest

from evret_core.cli import plugins_cmd
from evret_core.plugins import hookspecs, kinds, registry
from evret_core.plugins.kinds import KINDS, Kind
from evret_core.plugins.loading import get_registry, register_plugin

from .conftest import REPO


def test_kinds_are_frozen_and_unique() -> None:
    assert len({k.name for k in KINDS}) == len({k.hook for k in KINDS}) == len({k.label for k in KINDS}) == len(KINDS)
    with pytest.raises(FrozenInstanceError):
        kinds.JUDGE.name = "other"  # type: ignore[misc]


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_every_kind_has_its_hookspec_base_and_create_function(kind: Kind[object]) -> None:
    assert hasattr(getattr(hookspecs, kind.hook), f"{hookspecs.PROJECT_NAME}_spec"), f"no hookspec {kind.hook}"
    assert isinstance(kind.base(), type)
    create = getattr(registry, f"create_{kind.name}")
    # the public create_* returns the kind's base type (annotations are strings under `from __future__`)
    assert inspect.signature(create).return_annotation == kind.base_path.rpartition(":")[2]
    assert getattr(registry, f"{kind.name}_names")() == get_registry().names(kind.name)


@pytest.mark.parametrize("kind", [k for k in KINDS if k.conformance is not None], ids=lambda k: k.name)
def test_conformance_names_resolve(kind: Kind[object]) -> None:
    """Kinds without a suite today have ``conformance=None``; every named suite is a class of evret_core.testing."""
    suite = kind.conformance_suite()
    assert isinstance(suite, type) and any(name.startswith("test_") for name in dir(suite))


def test_hook_names_and_registry_tables_come_from_the_table() -> None:
    assert hookspecs.HOOK_NAMES == (*(k.hook for k in KINDS), *kinds.OTHER_HOOKS)
    reg = get_registry()
    reg.ensure_loaded()
    assert list(reg._tables) == [k.name for k in KINDS]


def test_docs_list_the_hooks_in_the_tables_order() -> None:
    text = (REPO / "docs" / "hooks.md").read_text(encoding="utf-8")
    assert re.findall(r"^## (\w+)\s*$", text, flags=re.MULTILINE) == list(hookspecs.HOOK_NAMES)


def test_create_is_typed_by_kind_and_builds_the_registered_object() -> None:
    judge = registry.create(kinds.JUDGE, "exact")
    assert isinstance(judge, kinds.JUDGE.base()) and registry.recipe(judge) == registry.Recipe("judge", "exact", {})
    metric = registry.create_metric("ndcg@10")
    assert isinstance(metric, kinds.METRIC.base()) and metric.name == "ndcg@10"


def test_a_row_added_to_the_table_is_a_kind_everywhere(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """Registry, create() and ``evret plugins`` need nothing but the row (and its hookspec) for a new kind."""
    widget: Kind[object] = Kind("widget", "register_widgets", "builtins:object", "widgets")
    monkeypatch.setattr(kinds, "KINDS", (*KINDS, widget))
    monkeypatch.setitem(kinds.BY_NAME, "widget", widget)

    class Specs:
        @hookspecs.hookspec
        def register_widgets(self, register: hookspecs.Register) -> None:
            """Register widgets."""

    class Plugin:
        @hookspecs.hookimpl
        def register_widgets(self, register: hookspecs.Register) -> None:
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
    assert rows == [(k.name, k.hook, k.base_path, k.label, k.conformance or "") for k in KINDS]
