"""``DirectJudge``: an LLM picks, for each instance, the one option of a criterion that describes it best."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

from evret_core.contracts.errors import EvretError
from evret_core.contracts.provider import LLMProvider
from evret_core.criteria.shared import Consistency, CriteriaJudge, PositionalBias, bias_summary, majority_vote
from evret_core.criteria.shared import mean as _mean
from evret_core.criteria.types import Criteria, MultiCriteria
from evret_core.llm.choices import with_choices
from evret_core.llm.fencing import fence_notice, new_nonce
from evret_core.llm.structured import AnswerError, Structured

SYSTEM_PROMPT = (
    "You are an impartial evaluator. You assess a response against one criterion and choose exactly one of the "
    "listed options. Reply with only a JSON object, no other text."
)


class DirectAnswer(BaseModel):
    """The JSON the model must answer with."""

    explanation: str
    selected_option: str
    feedback: str | None = None


class DirectInstanceResult(BaseModel):
    """One instance judged on one criterion. ``option``/``score`` are None when unmeasured (see ``error``)."""

    criteria: str
    option: str | None = None
    score: float | None = None
    normalized_score: float | None = None
    explanation: str | None = None
    feedback: str | None = None
    measured: bool = True
    error: str | None = None
    tries: int = 0
    positional_bias: PositionalBias | None = None
    consistency: Consistency | None = None


def _bias_summary(flags: list[bool | None]) -> dict[str, Any] | None:
    return bias_summary(flags) if flags else None


class DirectResults(BaseModel):
    """Every instance's result on one criterion, the mean option score and the bias/consistency summaries."""

    criteria: str
    results: list[DirectInstanceResult]
    scores: list[float | None]
    mean: float | None
    normalized_mean: float | None
    unmeasured: list[int] = Field(default_factory=list)
    positional_bias: dict[str, Any] | None = None
    agreement_rate: float | None = None
    stats: dict[str, Any] = Field(default_factory=dict)

    def rows(self) -> list[dict[str, Any]]:
        return [{"score": r.score, **r.model_dump(exclude={"score"}, exclude_none=True)} for r in self.results]

    def summary_lines(self) -> list[str]:
        shown = "n/a" if self.mean is None else f"{self.mean:.4f}"
        lines = [f"{self.criteria}: mean score {shown} over {len(self.results)} instances"
                 f" ({len(self.unmeasured)} unmeasured)"]
        if self.positional_bias:
            lines.append(f"positional bias: verdict changed in {self.positional_bias['detected']} of "
                         f"{self.positional_bias['checked']} instances")
        if self.agreement_rate is not None:
            lines.append(f"self-consistency: mean agreement rate {self.agreement_rate:.3f}")
        return lines


class CriterionScore(BaseModel):
    """One criterion's part in a multi-criteria score."""

    criteria: str
    weight: float
    strategy: str
    required: bool
    item_score: float | None
    weighted_score: float | None
    passed: bool | None
    result: DirectInstanceResult


class MultiCriteriaInstanceResult(BaseModel):
    """One instance's aggregated score in 0..1 (None when a criterion was unmeasured) and its parts."""

    aggregated_score: float | None
    items: list[CriterionScore]
    failed_required: list[str] = Field(default_factory=list)
    measured: bool = True


class MultiCriteriaResults(BaseModel):
    """Aggregated scores per instance, their mean, and each criterion's single results."""

    results: list[MultiCriteriaInstanceResult]
    scores: list[float | None]
    mean: float | None
    unmeasured: list[int] = Field(default_factory=list)
    per_criterion: dict[str, DirectResults] = Field(default_factory=dict)
    stats: dict[str, Any] = Field(default_factory=dict)

    def rows(self) -> list[dict[str, Any]]:
        return [{"score": r.aggregated_score,
                 "weighted_scores": {i.criteria: i.weighted_score for i in r.items},
                 "options": {i.criteria: i.result.option for i in r.items},
                 **({"failed_required": r.failed_required} if r.failed_required else {}),
                 **({"error": "; ".join(f"{i.criteria}: {i.result.error}" for i in r.items if not i.result.measured)}
                    if not r.measured else {})}
                for r in self.results]

    def summary_lines(self) -> list[str]:
        shown = "n/a" if self.mean is None else f"{self.mean:.4f}"
        lines = [f"multi-criteria: mean aggregated score {shown} over {len(self.results)} instances"
                 f" ({len(self.unmeasured)} unmeasured)"]
        for single in self.per_criterion.values():
            lines.extend("  " + line for line in single.summary_lines())
        return lines


class DirectJudge(CriteriaJudge):
    """Judges each instance against a criterion by choosing one of its options, with a score and an explanation.

    ``generate_feedback`` asks for an actionable suggestion whenever the option chosen is not the best one.
    Invalid answers and options that do not exist are sent back with the error, up to ``max_tries``; then the
    instance is unmeasured and reported. Other options: see :class:`~evret_core.criteria.shared.CriteriaJudge`. ``criteria`` may be a :class:`Criteria`, a sentence (yes/no) or a
    :class:`MultiCriteria`.
    """

    name = "direct"
    kind = "direct"

    def __init__(
        self,
        criteria: Criteria | MultiCriteria | str | Mapping[str, Any] | None = None,
        provider: str | LLMProvider | None = None,
        model: str | None = None,
        *,
        generate_feedback: bool = False,
        **options: Any,
    ) -> None:
        super().__init__(None, provider, model, **options)
        self.criteria = None if criteria is None else self._coerce(criteria)
        self.generate_feedback = bool(generate_feedback)

    @staticmethod
    def _coerce(value: Any) -> Criteria | MultiCriteria:
        if isinstance(value, MultiCriteria):
            return value
        if isinstance(value, Mapping) and "items" in value:
            return MultiCriteria.coerce(value)
        criterion = Criteria.coerce(value)
        if len(criterion.options) < 2:
            raise EvretError(f"criteria {criterion.name!r}: direct judging needs at least two options")
        return criterion

    # -- prompting -------------------------------------------------------------------------------------------
    def messages(self, record: Mapping[str, Any], criterion: Criteria, reverse: bool = False) -> tuple[str, str]:
        """The system and user messages for one instance; ``reverse`` lists the options in the opposite order."""
        options = list(reversed(criterion.options)) if reverse else list(criterion.options)
        listed = "\n".join(f'- "{o.name}"' + (f": {o.description}" if o.description else "") for o in options)
        feedback = ""
        fields = '"explanation": "<your reasoning>", "selected_option": "<one option name, verbatim>"'
        if self.generate_feedback:
            best = " or ".join(f'"{b}"' for b in criterion.best_options())
            feedback = (f'\nAlso give "feedback": one actionable suggestion that would make the response earn {best}; '
                        "leave it empty when the response already earns it.")
            fields += ', "feedback": "<suggestion>"'
        field = criterion.to_evaluate_field
        names = (field, *criterion.context_fields)
        user = (
            f"{self.context_block(record, criterion, names)}"
            f"Response to evaluate [{field}]:\n"
            f"{self.fenced(field, record[field], names)}\n\n"
            f"Criterion: {criterion.name}\n"
            + (f"{criterion.description}\n" if criterion.description != criterion.name else "")
            + f"\nOptions:\n{listed}\n\n"
            "Reason step by step about how well the response meets the criterion, then choose the one option "
            f"that describes it best.{feedback}\nAnswer with the JSON object {{{fields}}}."
        )
        return SYSTEM_PROMPT + fence_notice(self.nonce, field), user

    def checker(self, criterion: Criteria) -> Callable[[DirectAnswer], DirectAnswer]:
        """Validation beyond the schema: the option exists (its name normalised), feedback when asked for."""
        best = set(criterion.best_options())

        def check(answer: DirectAnswer) -> DirectAnswer:
            option = criterion.option(answer.selected_option)
            if option is None:
                names = ", ".join(f'"{n}"' for n in criterion.option_names)
                raise AnswerError(f"selected_option {answer.selected_option!r} is not one of the options: {names}")
            answer.selected_option = option.name
            if option.name in best:
                answer.feedback = None
            elif self.generate_feedback and not (answer.feedback or "").strip():
                raise AnswerError('"feedback" is required when the selected option is not the best one')
            elif not self.generate_feedback:
                answer.feedback = None
            return answer

        return check

    # -- judging ---------------------------------------------------------------------------------------------
    def _combine(self, outcomes: list[Structured[DirectAnswer]]) -> tuple[DirectAnswer | None, str | None,
                                                                          Consistency | None]:
        answers = [o.value for o in outcomes if o.value is not None]
        consistency = None
        if self.self_consistency > 1:
            consistency = Consistency(samples=len(outcomes), measured_samples=len(answers), votes={})
        if not answers:
            return None, outcomes[0].unmeasured, consistency
        majority, agreement = majority_vote([a.selected_option for a in answers])
        if consistency is not None:
            votes: dict[str, int] = {}
            for a in answers:
                votes[a.selected_option] = votes.get(a.selected_option, 0) + 1
            consistency.votes, consistency.majority, consistency.agreement_rate = votes, majority, agreement
        chosen = next(a for a in answers if a.selected_option == majority)
        return chosen, None, consistency

    async def judge_one(self, record: Mapping[str, Any], criterion: Criteria) -> DirectInstanceResult:
        check = self.checker(criterion)
        payload = {"criterion": criterion.model_dump(), "feedback": self.generate_feedback,
                   "fields": {f: record[f] for f in [criterion.to_evaluate_field, *criterion.context_fields]}}
        # the option names in the schema too, so that a provider which constrains its output picks one of them
        schema = with_choices(DirectAnswer, selected_option=criterion.option_names)
        runs = [self.sample(*self.messages(record, criterion), schema, check, {**payload, "reverse": False})]
        if self.check_positional_bias:
            runs.append(self.sample(*self.messages(record, criterion, reverse=True), schema, check,
                                    {**payload, "reverse": True}))
        outcomes = await asyncio.gather(*runs)
        answer, error, consistency = self._combine(outcomes[0])
        tries = sum(o.tries for o in outcomes[0])
        bias = None
        if self.check_positional_bias:
            reversed_answer, reversed_error, _ = self._combine(outcomes[1])
            if answer is None or reversed_answer is None:
                bias = PositionalBias(detected=None, error=error or reversed_error,
                                      reversed_verdict=reversed_answer.selected_option if reversed_answer else None)
            else:
                bias = PositionalBias(detected=answer.selected_option != reversed_answer.selected_option,
                                      reversed_verdict=reversed_answer.selected_option)
        if answer is None:
            return DirectInstanceResult(criteria=criterion.name, measured=False, error=error, tries=tries,
                                        positional_bias=bias, consistency=consistency)
        option = criterion.option(answer.selected_option)
        assert option is not None and option.score is not None
        return DirectInstanceResult(
            criteria=criterion.name, option=option.name, score=option.score,
            normalized_score=criterion.normalize(option.score), explanation=answer.explanation,
            feedback=answer.feedback, tries=tries, positional_bias=bias, consistency=consistency,
        )

    def _summarise(self, criterion: Criteria, results: list[DirectInstanceResult]) -> DirectResults:
        scores = [r.score for r in results]
        agreements = [r.consistency.agreement_rate for r in results if r.consistency is not None]
        return DirectResults(
            criteria=criterion.name, results=results, scores=scores, mean=_mean(scores),
            normalized_mean=_mean([r.normalized_score for r in results]),
            unmeasured=[i for i, r in enumerate(results) if not r.measured],
            positional_bias=_bias_summary([r.positional_bias.detected for r in results if r.positional_bias])
            if self.check_positional_bias else None,
            agreement_rate=_mean(agreements) if self.self_consistency > 1 else None,
        )

    def evaluate(self, records: Sequence[Mapping[str, Any]],
                 criteria: Criteria | MultiCriteria | str | Mapping[str, Any] | None = None,
                 ) -> DirectResults | MultiCriteriaResults:
        """Judge every record; with a :class:`MultiCriteria`, every record on every criterion, aggregated."""
        chosen = self._coerce(criteria) if criteria is not None else self.criteria
        if chosen is None:
            raise EvretError("judge 'direct': no criteria given; pass criteria=... to the judge or to evaluate()")
        records = list(records)
        self.nonce = new_nonce()
        self._cache_hits = 0
        if isinstance(chosen, MultiCriteria):
            return self._evaluate_multi(records, chosen)
        self.check_fields(records, [chosen])
        results = self.run([self.judge_one(r, chosen) for r in records])
        summary = self._summarise(chosen, results)
        summary.stats = {"llm": self.usage()}
        return summary

    def _evaluate_multi(self, records: list[Mapping[str, Any]], multi: MultiCriteria) -> MultiCriteriaResults:
        criteria = [item.criterion for item in multi.items]
        self.check_fields(records, criteria)
        coros = [self.judge_one(r, c) for r in records for c in criteria]
        flat = self.run(coros)
        n = len(criteria)
        per_record = [flat[i * n:(i + 1) * n] for i in range(len(records))]
        instance_results = [aggregate(multi, singles) for singles in per_record]
        scores = [r.aggregated_score for r in instance_results]
        per_criterion = {c.name: self._summarise(c, [singles[j] for singles in per_record])
                         for j, c in enumerate(criteria)}
        return MultiCriteriaResults(
            results=instance_results, scores=scores, mean=_mean(scores),
            unmeasured=[i for i, r in enumerate(instance_results) if not r.measured],
            per_criterion=per_criterion, stats={"llm": self.usage()},
        )


def aggregate(multi: MultiCriteria, singles: Sequence[DirectInstanceResult]) -> MultiCriteriaInstanceResult:
    """Combine one instance's single-criterion results: sum of weight x item score, 0 if a required item fails."""
    items: list[CriterionScore] = []
    failed: list[str] = []
    measured = True
    for item, single in zip(multi.items, singles, strict=True):
        weight = float(item.weight or 0.0)
        if single.option is None or single.score is None:
            measured = False
            items.append(CriterionScore(criteria=item.criterion.name, weight=weight, strategy=item.strategy,
                                        required=item.required, item_score=None, weighted_score=None,
                                        passed=None, result=single))
            continue
        value, passed = item.item_score(single.option, single.score, multi.normalize_scores)
        if item.required and not passed:
            failed.append(item.criterion.name)
        items.append(CriterionScore(criteria=item.criterion.name, weight=weight, strategy=item.strategy,
                                    required=item.required, item_score=value, weighted_score=weight * value,
                                    passed=passed, result=single))
    if not measured:
        total = None
    elif failed:
        total = 0.0
    else:
        total = sum(i.weighted_score or 0.0 for i in items)
    return MultiCriteriaInstanceResult(aggregated_score=total, items=items, failed_required=failed,
                                       measured=measured)
