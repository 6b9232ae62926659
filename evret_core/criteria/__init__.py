"""Criteria judges: an LLM grades outputs against criteria, directly (pick an option) or pairwise (compare)."""

from evret_core.criteria.direct import (
    CriterionScore,
    DirectInstanceResult,
    DirectJudge,
    DirectResults,
    MultiCriteriaInstanceResult,
    MultiCriteriaResults,
)
from evret_core.criteria.pairwise import PairVerdict, PairwiseInstanceResult, PairwiseJudge, PairwiseResults
from evret_core.criteria.shared import Consistency, CriteriaJudge, PositionalBias
from evret_core.criteria.types import Criteria, CriteriaOption, MultiCriteria, MultiCriteriaItem

__all__ = [
    "Consistency",
    "Criteria",
    "CriteriaJudge",
    "CriteriaOption",
    "CriterionScore",
    "DirectInstanceResult",
    "DirectJudge",
    "DirectResults",
    "MultiCriteria",
    "MultiCriteriaInstanceResult",
    "MultiCriteriaItem",
    "MultiCriteriaResults",
    "PairVerdict",
    "PairwiseInstanceResult",
    "PairwiseJudge",
    "PairwiseResults",
    "PositionalBias",
]
