"""evret-judge-keywords: the ``keywords`` judge, registered through Evret's ``register_judges`` hook.

This is the plugin module (the entry point's value): ``evret plugins`` imports it and calls its hooks. It imports
only ``evret_core.sdk``, which loads neither numpy nor pydantic, so the judge and its hook live here together.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from evret_core.sdk import EvretError, Judge, JudgmentContext, Register, hookimpl

_WORD = re.compile(r"[^\W\d_]+")


class KeywordJudge(Judge):
    """Match when the retrieved text holds at least ``min_fraction`` of the expected answer's keywords."""

    name = "keywords"

    def __init__(self, min_fraction: float = 1.0, min_length: int = 4) -> None:
        if not 0 < float(min_fraction) <= 1:
            raise EvretError(f"keywords judge: min_fraction must be in (0, 1], got {min_fraction}")
        self.min_fraction = float(min_fraction)
        self.min_length = int(min_length)

    def keywords(self, text: str) -> set[str]:
        return {w for w in _WORD.findall(text.lower()) if len(w) >= self.min_length}

    def judge(self, context: JudgmentContext) -> bool:
        found = self.keywords(context.retrieved_text)
        # the expected text or any of its aliases may match
        for variant in context.expected_variants:
            wanted = self.keywords(variant)
            if wanted and len(wanted & found) / len(wanted) >= self.min_fraction:
                return True
        return False

    def batch_judge(self, contexts: Sequence[JudgmentContext]) -> list[bool | None]:
        # each distinct text is split into keywords once
        cache: dict[str, set[str]] = {}

        def words(text: str) -> set[str]:
            if text not in cache:
                cache[text] = self.keywords(text)
            return cache[text]

        answers: list[bool | None] = []
        for c in contexts:
            found = words(c.retrieved_text)
            answers.append(any(
                bool(wanted) and len(wanted & found) / len(wanted) >= self.min_fraction
                for wanted in map(words, c.expected_variants)
            ))
        return answers

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "min_fraction": self.min_fraction, "min_length": self.min_length}


@hookimpl
def register_judges(register: Register[Judge]) -> None:
    register("keywords", KeywordJudge)


__all__ = ["KeywordJudge", "register_judges"]
