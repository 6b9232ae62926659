"""The conversation contract: a :class:`Turn` is one message of a conversation, a :class:`RewriteRequest` asks a
:class:`Rewriter` to turn a user's message into a standalone search query given the conversation before it.

Rewriters are the ``rewriter`` kind (registered through ``register_rewriters``): the query form ``rewriter`` of a
conversation run retrieves each turn with the rewriter's output, beside the turn's own message, the whole history
and a rewrite given in the data. A rewriter returns None for a turn it could not rewrite: that turn is unmeasured
under the form, never silently the raw message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evret_core.contracts.values import Value, value_type

__all__ = ["ROLES", "RewriteRequest", "Rewriter", "Turn"]

ROLES = ("user", "agent")
"""Who says a message: the user, or the agent (the assistant) answering them."""


@value_type
class Turn(Value):
    """One message of a conversation: who said it (``user`` or ``agent``) and what."""

    role: str
    text: str

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"Turn.role must be {' or '.join(ROLES)}, got {self.role!r}")
        if not isinstance(self.text, str):
            raise ValueError(f"Turn.text must be a string, got {type(self.text).__name__}")


@value_type
class RewriteRequest(Value):
    """Rewrite the user's ``message`` of turn ``turn_id`` into a standalone query, given ``history``: the
    conversation's earlier messages, oldest first (user and agent messages when the data has the agent's)."""

    turn_id: str
    message: str
    history: tuple[Turn, ...] = ()
    conversation_id: str = ""


class Rewriter:
    """Base of the ``rewriter`` kind: turns a conversation's user message into a standalone search query.

    Implement :meth:`rewrite` (one request) or override :meth:`batch_rewrite` (many at once, e.g. concurrent LLM
    calls). Each returns the query text, or None when none could be made (the turn is then unmeasured under the
    ``rewriter`` form). Optional, as for judges: ``prepare(requests)``, ``stats()`` (calls, cost, cache hits of the
    run), ``reset_stats()``, ``plan(requests)`` (a dry run: the calls left after the cache) and :meth:`config`.
    """

    name: str = "rewriter"

    deterministic: bool = False
    """Whether the same request always gives the same text (the conformance suite checks it when True)."""

    def rewrite(self, request: RewriteRequest) -> str | None:
        """The standalone query for ``request``, or None when it could not be made."""
        if type(self).batch_rewrite is Rewriter.batch_rewrite:
            raise NotImplementedError(f"{type(self).__name__} implements neither rewrite nor batch_rewrite")
        return self.batch_rewrite([request])[0]

    def batch_rewrite(self, requests: Sequence[RewriteRequest]) -> list[str | None]:
        """One answer per request, in order; the default calls :meth:`rewrite` for each."""
        return [self.rewrite(request) for request in requests]

    def config(self) -> dict[str, Any]:
        """What the results' manifest records about the rewriter (never a secret)."""
        return {"name": self.name}
