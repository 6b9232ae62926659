"""Evaluator types: retrieval (and, from plugins and later modules, output and generation evaluators)."""

from evret_core.evaluators.retrieval import MATCHING_MODES, Evaluator, UnmeasuredJudgmentsError

__all__ = ["Evaluator", "MATCHING_MODES", "UnmeasuredJudgmentsError"]
