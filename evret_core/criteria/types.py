"""Criteria, their options, and the multi-criteria weighting used by the criteria judges."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field, model_validator

from evret_core.contracts.errors import EvretError

WEIGHT_TOLERANCE = 1e-6


class CriteriaOption(BaseModel):
    """One answer a judge may choose for a criterion, and the score it is worth."""

    name: str
    description: str = ""
    score: float | None = None

    def __init__(self, name: str | None = None, description: str = "", score: float | None = None,
                 **data: Any) -> None:
        if name is not None:
            data["name"] = name
        super().__init__(description=description, score=score, **data)


class Criteria(BaseModel):
    """What to judge: ``description`` of the quality, the ``options`` to choose from (direct judging), the record
    field holding what is judged (``to_evaluate_field``) and the fields shown as context (``context_fields``).

    Options without scores are scored by their order: the first is best (1.0), the last worst (0.0).
    """

    name: str
    description: str = ""
    options: list[CriteriaOption] = Field(default_factory=list)
    to_evaluate_field: str = "output"
    context_fields: list[str] = Field(default_factory=lambda: ["input"])

    def __init__(self, name: str | None = None, description: str | None = None,
                 options: list[CriteriaOption] | None = None, **data: Any) -> None:
        if name is not None:
            data["name"] = name
        if description is not None:
            data["description"] = description
        if options is not None:
            data["options"] = options
        super().__init__(**data)

    @model_validator(mode="after")
    def _check(self) -> Criteria:
        if not self.name.strip():
            raise EvretError("criteria: 'name' must not be empty")
        names = [o.name for o in self.options]
        if any(not n.strip() for n in names):
            raise EvretError(f"criteria {self.name!r}: every option needs a non-empty name")
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise EvretError(f"criteria {self.name!r}: option names must be unique; repeated: {', '.join(duplicates)}")
        scored = [o.score is not None for o in self.options]
        if any(scored) and not all(scored):
            missing = ", ".join(o.name for o in self.options if o.score is None)
            raise EvretError(f"criteria {self.name!r}: give every option a score or none; unscored: {missing}")
        if self.options and not any(scored):
            n = len(self.options)
            for i, option in enumerate(self.options):
                option.score = 1.0 if n == 1 else 1.0 - i / (n - 1)
        for option in self.options:
            if option.score is not None and not math.isfinite(option.score):
                raise EvretError(f"criteria {self.name!r}: option {option.name!r} has a non-finite score")
        if not self.to_evaluate_field:
            raise EvretError(f"criteria {self.name!r}: 'to_evaluate_field' must name a record field")
        return self

    @classmethod
    def yes_no(cls, question: str) -> Criteria:
        """A yes/no criterion from a plain sentence: Yes scores 1.0, No 0.0."""
        return cls(
            name=question,
            description=question,
            options=[CriteriaOption("Yes", "The response meets the criterion.", 1.0),
                     CriteriaOption("No", "The response does not meet the criterion.", 0.0)],
        )

    @classmethod
    def coerce(cls, value: Criteria | str | Mapping[str, Any]) -> Criteria:
        """A :class:`Criteria` from itself, a plain string (a yes/no criterion) or a mapping of its fields."""
        if isinstance(value, Criteria):
            return value
        if isinstance(value, str):
            if not value.strip():
                raise EvretError("criteria: a criterion sentence must not be empty")
            return cls.yes_no(value)
        if isinstance(value, Mapping):
            data = dict(value)
            data["options"] = [o if isinstance(o, CriteriaOption) else CriteriaOption(**o)
                               for o in data.get("options") or []]
            try:
                return cls(**data)
            except (TypeError, ValueError) as exc:
                raise EvretError(f"criteria: {exc}") from None
        raise EvretError(f"criteria: expected a Criteria, a sentence or an object, got {type(value).__name__}")

    def option(self, name: str) -> CriteriaOption | None:
        """The option of this exact name, else the one whose name matches ignoring case and outer spaces."""
        for option in self.options:
            if option.name == name:
                return option
        folded = name.strip().casefold()
        for option in self.options:
            if option.name.strip().casefold() == folded:
                return option
        return None

    @property
    def option_names(self) -> list[str]:
        return [o.name for o in self.options]

    @property
    def min_score(self) -> float:
        return min(o.score for o in self.options if o.score is not None)

    @property
    def max_score(self) -> float:
        return max(o.score for o in self.options if o.score is not None)

    def best_options(self) -> list[str]:
        return [o.name for o in self.options if o.score == self.max_score]

    def normalize(self, score: float) -> float:
        """``score`` rescaled by the options' min and max to 0..1 (1.0 when every option scores the same)."""
        low, high = self.min_score, self.max_score
        return 1.0 if high == low else (score - low) / (high - low)


class MultiCriteriaItem(BaseModel):
    """One criterion of a multi-criteria judgment, with how its result counts.

    ``target_option``: 1.0 when that option is chosen, else 0.0. ``score_threshold``: 1.0 when the chosen option's
    score is at least the threshold, else 0.0. Neither: the option's score (normalised when the
    :class:`MultiCriteria` says so). ``required``: when this item fails (target missed, threshold not reached, or
    the worst option chosen) the aggregated score is 0.
    """

    criterion: Criteria
    weight: float | None = None
    target_option: str | None = None
    score_threshold: float | None = None
    required: bool = False

    def __init__(self, criterion: Criteria | str | Mapping[str, Any] | None = None, **data: Any) -> None:
        if criterion is not None:
            data["criterion"] = Criteria.coerce(criterion)
        elif isinstance(data.get("criterion"), (str, Mapping)):
            data["criterion"] = Criteria.coerce(data["criterion"])
        super().__init__(**data)

    @model_validator(mode="after")
    def _check(self) -> MultiCriteriaItem:
        name = self.criterion.name
        if not self.criterion.options:
            raise EvretError(f"multi-criteria item {name!r}: the criterion needs options to judge directly")
        if self.target_option is not None and self.score_threshold is not None:
            raise EvretError(f"multi-criteria item {name!r}: set target_option or score_threshold, not both")
        if self.target_option is not None and self.criterion.option(self.target_option) is None:
            raise EvretError(f"multi-criteria item {name!r}: target_option {self.target_option!r} is not one of "
                             f"the options ({', '.join(self.criterion.option_names)})")
        if self.weight is not None and not (0.0 <= self.weight <= 1.0):
            raise EvretError(f"multi-criteria item {name!r}: weight must be in 0..1, got {self.weight}")
        return self

    @property
    def strategy(self) -> str:
        if self.target_option is not None:
            return "target_option"
        if self.score_threshold is not None:
            return "score_threshold"
        return "score"

    def item_score(self, option: str, score: float, normalize: bool) -> tuple[float, bool]:
        """``(score before weighting, passed)`` for the option chosen."""
        if self.target_option is not None:
            target = self.criterion.option(self.target_option)
            hit = target is not None and option == target.name
            return (1.0 if hit else 0.0), hit
        if self.score_threshold is not None:
            hit = score >= self.score_threshold
            return (1.0 if hit else 0.0), hit
        value = self.criterion.normalize(score) if normalize else score
        return value, score > self.criterion.min_score or self.criterion.min_score == self.criterion.max_score


class MultiCriteria(BaseModel):
    """Several criteria judged directly and combined into one score: the sum of the weighted item scores.

    Weights must sum to 1 (all left out: equal weights). ``normalize_scores`` (default on) rescales each
    criterion's score by its options' min and max, so the aggregate lies in 0..1.
    """

    items: list[MultiCriteriaItem]
    normalize_scores: bool = True

    def __init__(self, items: list[MultiCriteriaItem] | None = None, **data: Any) -> None:
        if items is not None:
            data["items"] = items
        super().__init__(**data)

    @model_validator(mode="after")
    def _check(self) -> MultiCriteria:
        if not self.items:
            raise EvretError("multi-criteria: at least one item is needed")
        names = [item.criterion.name for item in self.items]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise EvretError(f"multi-criteria: criterion names must be unique; repeated: {', '.join(repeated)}")
        weights = [item.weight for item in self.items]
        if all(w is None for w in weights):
            for item in self.items:
                item.weight = 1.0 / len(self.items)
        elif any(w is None for w in weights):
            missing = ", ".join(item.criterion.name for item in self.items if item.weight is None)
            raise EvretError(f"multi-criteria: give every item a weight or none; without weight: {missing}")
        total = sum(item.weight or 0.0 for item in self.items)
        if abs(total - 1.0) > WEIGHT_TOLERANCE:
            raise EvretError(f"multi-criteria: the weights sum to {total:g}; they must sum to 1")
        return self

    @classmethod
    def coerce(cls, value: MultiCriteria | Mapping[str, Any]) -> MultiCriteria:
        if isinstance(value, MultiCriteria):
            return value
        data = dict(value)
        data["items"] = [i if isinstance(i, MultiCriteriaItem) else MultiCriteriaItem(**i)
                         for i in data.get("items") or []]
        return cls(**data)
