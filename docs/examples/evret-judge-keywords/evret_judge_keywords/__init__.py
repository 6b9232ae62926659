"""evret-judge-keywords: the ``keywords`` judge, registered through Evret's ``register_judges`` hook.

This is the plugin module (the entry point's value): ``evret plugins`` imports it and calls its hooks, so it imports
only the hook marker. The judge lives in :mod:`evret_judge_keywords.judge`, imported when a judge is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evret_core.sdk import hookimpl

if TYPE_CHECKING:
    from evret_judge_keywords.judge import KeywordJudge

__all__ = ["KeywordJudge", "keywords", "register_judges"]


def keywords(min_fraction: float = 1.0, min_length: int = 4) -> KeywordJudge:
    """Build a :class:`~evret_judge_keywords.judge.KeywordJudge` (its options are this factory's parameters)."""
    from evret_judge_keywords.judge import KeywordJudge

    return KeywordJudge(min_fraction=min_fraction, min_length=min_length)


def __getattr__(name: str) -> Any:
    if name == "KeywordJudge":  # `from evret_judge_keywords import KeywordJudge` still works, lazily
        from evret_judge_keywords.judge import KeywordJudge

        return KeywordJudge
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@hookimpl
def register_judges(register: Any) -> None:
    register("keywords", keywords)
