"""The rewriter contract, as tests: a rewriter plugin's test class subclasses :class:`RewriterConformance`."""

from __future__ import annotations

import json
from typing import Any

import pytest

from evret_core.contracts import kinds
from evret_core.contracts.conversation import Rewriter, RewriteRequest, Turn
from evret_core.contracts.executor import rewrite_chunk
from evret_core.testing.suite import Conformance

REQUESTS: tuple[RewriteRequest, ...] = (
    RewriteRequest(turn_id="honey:1", message="Does honey ever spoil?", conversation_id="honey"),
    RewriteRequest(turn_id="honey:2", message="Why not?", conversation_id="honey",
                   history=(Turn("user", "Does honey ever spoil?"),
                            Turn("agent", "No: sealed honey keeps for centuries."))),
    RewriteRequest(turn_id="honey:3", message="And how should I store it?", conversation_id="honey",
                   history=(Turn("user", "Does honey ever spoil?"),
                            Turn("agent", "No: sealed honey keeps for centuries."),
                            Turn("user", "Why not?"),
                            Turn("agent", "Its low water content stops bacteria from growing."))),
    RewriteRequest(turn_id="tower:2", message="How tall is it?", conversation_id="tower",
                   history=(Turn("user", "Tell me about the Eiffel Tower"),)),
)
"""The suite's default requests: a first turn with no history, follow-ups that need it, with and without the
agent's replies."""


class RewriterConformance(Conformance):
    """Tests every rewriter must pass. Override the ``rewriter`` fixture (and ``requests`` when your rewriter needs
    others). A rewriter that sets ``deterministic = True`` must give the same text for the same request."""

    kind = kinds.REWRITER

    @pytest.fixture
    def subject(self, rewriter: Any) -> Any:
        return rewriter

    @pytest.fixture
    def rewriter(self) -> Any:
        raise NotImplementedError("override the `rewriter` fixture to return the rewriter under test")

    @pytest.fixture
    def requests(self) -> tuple[RewriteRequest, ...]:
        return REQUESTS

    def test_is_a_rewriter(self, rewriter: Any) -> None:
        assert isinstance(rewriter, Rewriter)
        assert isinstance(rewriter.name, str) and rewriter.name

    def test_one_text_or_none_per_request_in_order(self, rewriter: Any,
                                                   requests: tuple[RewriteRequest, ...]) -> None:
        texts = rewrite_chunk(rewriter, requests)  # checks the count and the types
        assert len(texts) == len(requests)
        alone = [rewriter.rewrite(request) for request in requests]
        if rewriter.deterministic:
            assert texts == [None if t is None or not t.strip() else t for t in alone], \
                "batch_rewrite must give each request the text rewrite gives it alone"
        backwards = rewrite_chunk(rewriter, requests[::-1])
        if rewriter.deterministic:
            assert backwards == texts[::-1], "a request's text must not depend on its place in the batch"

    def test_a_first_turn_gets_a_query(self, rewriter: Any, requests: tuple[RewriteRequest, ...]) -> None:
        first = [r for r in requests if not r.history]
        assert first, "the requests must hold a first turn (no history)"
        for request in first:
            text = rewriter.rewrite(request)
            assert isinstance(text, str) and text.strip(), "a message with no history still has a query"

    def test_deterministic_when_it_says_so(self, rewriter: Any, requests: tuple[RewriteRequest, ...]) -> None:
        if not rewriter.deterministic:
            pytest.skip("the rewriter does not claim to be deterministic")
        assert rewrite_chunk(rewriter, requests) == rewrite_chunk(rewriter, requests)

    def test_nothing_to_rewrite_nothing_back(self, rewriter: Any) -> None:
        assert rewrite_chunk(rewriter, []) == []

    def test_config_is_json_with_the_name(self, rewriter: Any) -> None:
        config = rewriter.config()
        assert isinstance(config, dict) and config.get("name") == rewriter.name
        json.dumps(config)
