"""Hook register_evaluators: output evaluators (evaluate(records)) beside the built-in ones; the retrieval
evaluator is another kind with its own hook."""

from __future__ import annotations

from typing import Any

import pytest

from evret_core import UnknownNameError, create_evaluator, hookimpl
from evret_core.plugins.loading import register_plugin
from evret_core.plugins.registry import evaluator_names


class Nonempty:
    def evaluate(self, records: list[dict[str, Any]]) -> float:
        return sum(bool(r["output"].strip()) for r in records) / len(records)


class Plugin:
    @hookimpl
    def register_evaluators(self, register):  # type: ignore[no-untyped-def]
        register("nonempty", Nonempty)


def test_register_evaluators() -> None:
    register_plugin(Plugin(), name="p")
    assert {"exact", "regex", "llm-score", "direct", "pairwise", "nonempty"} <= set(evaluator_names())
    assert create_evaluator("nonempty").evaluate([{"output": "x"}, {"output": " "}]) == 0.5


def test_the_retrieval_evaluator_is_not_an_output_evaluator() -> None:
    assert "retrieval" not in evaluator_names()
    with pytest.raises(UnknownNameError, match="'retrieval' is a retrieval evaluator.*create_retrieval_evaluator"):
        create_evaluator("retrieval")
