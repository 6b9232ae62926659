"""Stage 3, judge: judges decide whether a retrieved text matches an expected answer text (or one of its aliases)."""

from evret_core.judge.lexical import ContainsJudge, ExactJudge, RegexJudge, TokenOverlapJudge, tokenize
from evret_core.judge.resolve import DEFAULT_JUDGE, resolve_judge

__all__ = [
    "DEFAULT_JUDGE",
    "ContainsJudge",
    "ExactJudge",
    "RegexJudge",
    "TokenOverlapJudge",
    "resolve_judge",
    "tokenize",
]
