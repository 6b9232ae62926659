"""The conversation contract: Turn's role check, the rewriter base, rewrite_chunk's checks, Executor.rewrite's local
default and the kinds row."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from evret_core.contracts import kinds
from evret_core.contracts.conversation import Rewriter, RewriteRequest, Turn
from evret_core.contracts.errors import EvretError
from evret_core.contracts.executor import Executor, RewriteRun, rewrite_chunk
from evret_core.testing import SUITES, RewriterConformance

REQUESTS = [RewriteRequest("c:1", "does honey spoil", conversation_id="c"),
            RewriteRequest("c:2", "why not", (Turn("user", "does honey spoil"), Turn("agent", "no")), "c"),
            RewriteRequest("c:3", "and sugar", (Turn("user", "does honey spoil"),), "c")]


class Echo(Rewriter):
    name = "echo"
    deterministic = True

    def rewrite(self, request: RewriteRequest) -> str | None:
        return f"{request.message} [{len(request.history)}]"


class Scripted(Rewriter):
    def __init__(self, answers: list[object]) -> None:
        self.answers = answers

    def batch_rewrite(self, requests: Sequence[RewriteRequest]) -> list[str | None]:
        return self.answers  # type: ignore[return-value]


def test_a_turn_is_said_by_the_user_or_the_agent() -> None:
    assert Turn("agent", "hi") == Turn("agent", "hi")
    with pytest.raises(ValueError, match="Turn.role must be user or agent, got 'assistant'"):
        Turn("assistant", "hi")
    with pytest.raises(ValueError, match="Turn.text must be a string"):
        Turn("user", None)  # type: ignore[arg-type]


def test_a_rewriter_needs_rewrite_or_batch_rewrite() -> None:
    with pytest.raises(NotImplementedError, match="neither rewrite nor batch_rewrite"):
        Rewriter().rewrite(REQUESTS[0])
    assert Echo().batch_rewrite(REQUESTS) == ["does honey spoil [0]", "why not [2]", "and sugar [1]"]
    assert Scripted(["only"]).rewrite(REQUESTS[0]) == "only"
    assert Rewriter().config() == {"name": "rewriter"}


def test_rewrite_chunk_checks_count_and_type_and_blank_is_none() -> None:
    assert rewrite_chunk(Scripted(["a", None, "  "]), REQUESTS) == ["a", None, None]
    with pytest.raises(EvretError, match="returned 2 answers for 3 requests"):
        rewrite_chunk(Scripted(["a", "b"]), REQUESTS)
    with pytest.raises(EvretError, match="returned int 3; a rewrite is a string or None"):
        rewrite_chunk(Scripted(["a", 3, "c"]), REQUESTS)


def test_the_local_executor_rewrites_in_order_in_chunks_with_progress() -> None:
    done: list[int] = []
    stats = {"calls": 0}

    class Counting(Echo):
        chunks = 0

        def batch_rewrite(self, requests: Sequence[RewriteRequest]) -> list[str | None]:
            type(self).chunks += 1
            return super().batch_rewrite(requests)

        def reset_stats(self) -> None:
            stats["calls"] = 0

        def stats(self) -> dict[str, int]:
            return {"calls": type(self).chunks}

    run = Executor().rewrite(Counting(), REQUESTS, batch_size=2, progress=done.append)
    assert isinstance(run, RewriteRun)
    assert run.texts == Echo().batch_rewrite(REQUESTS)
    assert done == [2, 3] and run.stats == {"calls": 2}
    assert Executor().rewrite(Echo(), REQUESTS, 64, lambda n: None).stats is None


def test_rewriters_are_a_kind_with_a_suite() -> None:
    assert kinds.REWRITER in kinds.KINDS and kinds.kind_named("rewriter").base is Rewriter
    assert SUITES[kinds.REWRITER] is RewriterConformance


class TestEchoConforms(RewriterConformance):
    @pytest.fixture
    def rewriter(self) -> Rewriter:
        return Echo()


def test_a_generation_request_and_a_claim_task_carry_the_history_of_a_turn() -> None:
    """A single question has no history (the default, so every request built before stays equal and hashes as
    before); a turn of a conversation carries the messages before it, oldest first, as :class:`Turn` s."""
    from evret_core.contracts.claims import ClaimTask
    from evret_core.contracts.generation import Answer, GenerationRequest

    history = (Turn("user", "Who wrote it?"), Turn("agent", "Jane Austen."))
    single = GenerationRequest("q1", "When?", (), "gold")
    turn = GenerationRequest("q1", "When?", (), "gold", history)
    assert single.history == () and turn.history == history
    assert single != turn and hash(single) == hash(GenerationRequest("q1", "When?", (), "gold"))
    assert ClaimTask("When?", (), ()).history == () and ClaimTask("When?", (), (), history=history).history == history
    assert Answer().clarified is False and Answer(text="Which one?", clarified=True).clarified is True
