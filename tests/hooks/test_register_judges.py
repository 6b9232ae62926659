"""Hook register_judges: a plugin's judge is created by name with options, and listed as the plugin's."""

from __future__ import annotations

from evret_core import ExactJudge, create_judge, hookimpl, list_plugins
from evret_core.plugins.loading import register_plugin


class Strict(ExactJudge):
    name = "strict"

    def __init__(self, level: int = 1) -> None:
        self.level = level


class Plugin:
    @hookimpl
    def register_judges(self, register):  # type: ignore[no-untyped-def]
        register("strict", Strict)


def test_register_judges() -> None:
    register_plugin(Plugin(), name="p")
    judge = create_judge("strict", level=3)
    assert isinstance(judge, Strict) and judge.level == 3
    assert {p.name: p.registers for p in list_plugins()}["p"] == {"judge": ["strict"]}
