"""Stage 3, judge: judges decide whether a retrieved text matches an expected answer text (or one of its aliases)."""

from evret_core.judge.base import DEFAULT_JUDGE, Judge, resolve_judge
from evret_core.judge.lexical import ContainsJudge, ExactJudge, RegexJudge, TokenOverlapJudge, tokenize

__all__ = [
    "DEFAULT_JUDGE",
    "ContainsJudge",
    "ExactJudge",
    "Judge",
    "RegexJudge",
    "TokenOverlapJudge",
    "resolve_judge",
    "tokenize",
]
