"""The judge contract: does a retrieved text match an expected answer text?"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from evret_core.models import JudgmentContext


class Judge(ABC):
    """Decides whether ``context.retrieved_text`` matches ``context.expected_text`` for ``context.query``.

    Subclasses implement :meth:`judge`; override :meth:`batch_judge` when judging many contexts at once is
    cheaper (shared tokenisation, batched encodes, concurrent API calls). ``batch_judge`` returns one answer
    per context, in order. A judgment that could not be made (an API failure after retries) is ``None`` and
    is reported as unmeasured; the built-in judges always answer.
    """

    name: str = "judge"

    @abstractmethod
    def judge(self, context: JudgmentContext) -> bool:
        """True when the retrieved text matches the expected text."""

    def batch_judge(self, contexts: Sequence[JudgmentContext]) -> list[bool]:
        """Judge every context, in order; the default judges them one by one."""
        return [self.judge(context) for context in contexts]

    def prepare(self, contexts: Sequence[JudgmentContext]) -> None:
        """Called once with every context an evaluation will judge, before the (possibly chunked) ``batch_judge``
        calls: a judge whose cost is per distinct text (embeddings) does that work here in one pass. Default: no-op.
        """

    def config(self) -> dict[str, Any]:
        """The settings that change this judge's answers; part of the results manifest and of cache keys."""
        return {"name": self.name}

    def __repr__(self) -> str:
        settings = ", ".join(f"{k}={v!r}" for k, v in self.config().items() if k != "name")
        return f"{type(self).__name__}({settings})"
