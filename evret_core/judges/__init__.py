"""Judges decide whether a retrieved text matches an expected answer text."""

from evret_core.judges.base import Judge
from evret_core.judges.text import ExactJudge, RegexJudge, TokenOverlapJudge, normalize, tokenize

__all__ = ["Judge", "ExactJudge", "RegexJudge", "TokenOverlapJudge", "normalize", "tokenize"]
