"""Hook register_rewriters: a rewriter registered by a plugin is created by name (its options checked by the
component builder), listed by ``evret plugins``, and rewrites through the executor's ``rewrite`` stage."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from evret_core.cli import plugins_cmd
from evret_core.contracts.conversation import Rewriter, RewriteRequest, Turn
from evret_core.contracts.errors import EvretError
from evret_core.contracts.hooks import hookimpl
from evret_core.evaluation.executors import LocalExecutor
from evret_core.plugins.loading import register_plugin
from evret_core.plugins.registry import create_rewriter, rewriter_names


class LastTopic(Rewriter):
    """Appends the last ``words`` words of the previous user message."""

    name = "last-topic"
    deterministic = True

    def __init__(self, words: int = 2) -> None:
        self.words = words

    def rewrite(self, request: RewriteRequest) -> str | None:
        earlier = [t.text for t in request.history if t.role == "user"]
        if not earlier:
            return request.message
        return " ".join([request.message, *earlier[-1].split()[-self.words:]])


class Plugin:
    @hookimpl
    def register_rewriters(self, register: Any) -> None:
        register("last-topic", LastTopic)


@pytest.fixture(autouse=True)
def plugin() -> None:
    register_plugin(Plugin(), name="rewrite-plugin")


def test_register_rewriters_by_name_with_options_checked(capsys: pytest.CaptureFixture[str]) -> None:
    assert "last-topic" in rewriter_names()
    assert create_rewriter("last-topic", words=1).words == 1  # type: ignore[attr-defined]
    with pytest.raises(EvretError, match=r"did you mean words\?"):
        create_rewriter("last-topic", wrods=1)
    assert plugins_cmd.run(argparse.Namespace(all=False, json=False)) == 0
    assert "rewrite-plugin\n" in (out := capsys.readouterr().out) and "rewriters: last-topic" in out


def test_a_registered_rewriter_runs_through_the_executor() -> None:
    requests = [RewriteRequest("c:1", "honey shelf life", conversation_id="c"),
                RewriteRequest("c:2", "why", (Turn("user", "honey shelf life"), Turn("agent", "forever")), "c")]
    run = LocalExecutor().rewrite(create_rewriter("last-topic"), requests, batch_size=1, progress=lambda n: None)
    assert run.texts == ["honey shelf life", "why shelf life"]
