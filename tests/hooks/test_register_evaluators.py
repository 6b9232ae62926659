"""Hook register_evaluators: the built-in `retrieval` type and a plugin's output evaluator side by side."""

from __future__ import annotations

from typing import Any

from evret_core import Evaluator, create_evaluator, hookimpl
from evret_core.plugins import register_plugin
from evret_core.registry import evaluator_names


class Nonempty:
    def evaluate(self, records: list[dict[str, Any]]) -> float:
        return sum(bool(r["output"].strip()) for r in records) / len(records)


class Plugin:
    @hookimpl
    def register_evaluators(self, register):  # type: ignore[no-untyped-def]
        register("nonempty", Nonempty)


def test_register_evaluators() -> None:
    register_plugin(Plugin(), name="p")
    assert {"retrieval", "nonempty"} <= set(evaluator_names())
    assert create_evaluator("nonempty").evaluate([{"output": "x"}, {"output": " "}]) == 0.5
    assert isinstance(create_evaluator("retrieval", retriever={}, metrics=["mrr@1"]), Evaluator)
