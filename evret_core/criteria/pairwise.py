"""``PairwiseJudge``: an LLM compares two or more responses for one instance against a criterion in one call."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from itertools import combinations
from typing import Any

from pydantic import BaseModel, Field

from evret_core.contracts.errors import EvretError
from evret_core.contracts.provider import LLMProvider
from evret_core.criteria.shared import (
    Consistency,
    CriteriaJudge,
    PositionalBias,
    bias_summary,
    majority_vote,
    mean,
)
from evret_core.criteria.types import Criteria
from evret_core.llm.fencing import fence_notice, format_field, new_nonce
from evret_core.llm.structured import AnswerError, Structured

Verdicts = dict[tuple[str, str], tuple[str, str]]

SYSTEM_PROMPT = (
    "You are an impartial evaluator. You compare responses against one criterion, pair by pair, and say which "
    "response of each pair meets it better. Reply with only a JSON object, no other text."
)


class PairComparison(BaseModel):
    """One pair of the model's answer: the response numbers as shown, the winner's number, and why."""

    responses: tuple[int, int]
    explanation: str = ""
    winner: int


class PairwiseAnswer(BaseModel):
    comparisons: list[PairComparison]


def positions(answer: PairwiseAnswer) -> dict[tuple[int, int], tuple[int, str]]:
    """``{(a, b): (winner, explanation)}`` with 0-based shown positions, a < b; an :class:`AnswerError` for a
    pair that names no two responses, a winner outside its pair, or a pair compared twice."""
    verdicts: dict[tuple[int, int], tuple[int, str]] = {}
    for c in answer.comparisons:
        a, b = sorted(c.responses)
        if a < 1 or a == b:
            raise AnswerError(f"pair {list(c.responses)} does not name two different responses")
        if c.winner not in (a, b):
            raise AnswerError(f"the winner of pair [{a}, {b}] must be {a} or {b}, got {c.winner}")
        key = (a - 1, b - 1)
        if key in verdicts:
            raise AnswerError(f"pair [{a}, {b}] is compared more than once")
        verdicts[key] = (c.winner - 1, c.explanation)
    return verdicts


class PairVerdict(BaseModel):
    """Which of two responses (by key) won, and why."""

    first: str
    second: str
    winner: str
    explanation: str = ""


class PairwiseInstanceResult(BaseModel):
    """One instance: per-response wins, win rate (wins / other responses) and ranking (best first)."""

    criteria: str
    responses: list[str]
    win_rates: dict[str, float] = Field(default_factory=dict)
    wins: dict[str, int] = Field(default_factory=dict)
    ranking: list[str] = Field(default_factory=list)
    comparisons: list[PairVerdict] = Field(default_factory=list)
    measured: bool = True
    error: str | None = None
    tries: int = 0
    positional_bias: PositionalBias | None = None
    consistency: Consistency | None = None


class PairwiseResults(BaseModel):
    """Every instance's result, each response key's mean win rate over the instances, bias and consistency."""

    criteria: str
    results: list[PairwiseInstanceResult]
    win_rates: dict[str, float]
    ranking: list[str]
    unmeasured: list[int] = Field(default_factory=list)
    positional_bias: dict[str, Any] | None = None
    agreement_rate: float | None = None
    stats: dict[str, Any] = Field(default_factory=dict)
    mean: float | None = None

    def rows(self) -> list[dict[str, Any]]:
        return [{"score": None, **r.model_dump(exclude_none=True)} for r in self.results]

    def summary_lines(self) -> list[str]:
        lines = [f"{self.criteria}: {len(self.results)} instances ({len(self.unmeasured)} unmeasured)"]
        lines += [f"  {key}: win rate {self.win_rates[key]:.4f}" for key in self.ranking]
        if self.positional_bias:
            lines.append(f"positional bias: verdict changed in {self.positional_bias['detected']} of "
                         f"{self.positional_bias['checked']} instances")
        if self.agreement_rate is not None:
            lines.append(f"self-consistency: mean agreement rate {self.agreement_rate:.3f}")
        return lines


def _responses(record: Mapping[str, Any], field: str, index: int) -> list[tuple[str, str]]:
    """``(key, text)`` of each response: list positions as ``"1"``, ``"2"``..., or a mapping's own keys."""
    value = record.get(field)
    if isinstance(value, Mapping):
        items = [(str(k), v) for k, v in value.items()]
    elif isinstance(value, (list, tuple)):
        items = [(str(i + 1), v) for i, v in enumerate(value)]
    else:
        raise EvretError(f"record {index + 1}: field {field!r} must be a list of responses or an object of "
                         f"named responses to compare, got {type(value).__name__}")
    if len(items) < 2:
        raise EvretError(f"record {index + 1}: field {field!r} needs at least two responses to compare")
    return [(k, format_field(v)) for k, v in items]


class PairwiseJudge(CriteriaJudge):
    """Compares the responses of each instance (a list, or an object of named responses, in the criterion's
    ``to_evaluate_field``) against a criterion, all pairs in one call; reports win rates and a ranking."""

    name = "pairwise"
    kind = "pairwise"

    def __init__(
        self,
        criteria: Criteria | str | Mapping[str, Any] | None = None,
        provider: str | LLMProvider | None = None,
        model: str | None = None,
        **options: Any,
    ) -> None:
        super().__init__(None, provider, model, **options)
        self.criteria = None if criteria is None else self._coerce(criteria)

    @staticmethod
    def _coerce(value: Any) -> Criteria:
        if isinstance(value, Mapping) and "items" in value:
            raise EvretError("judge 'pairwise': multi-criteria is for direct judging only")
        return Criteria.coerce(value)

    def messages(self, record: Mapping[str, Any], criterion: Criteria, shown: Sequence[str]) -> tuple[str, str]:
        """The system and user messages: responses numbered 1..n in the order of ``shown`` texts."""
        names = [f"response_{i + 1}" for i in range(len(shown))]
        blocks = "\n\n".join(f"Response {i + 1}:\n{self.fenced(names[i], text, names + criterion.context_fields)}"
                               for i, text in enumerate(shown))
        pairs = ", ".join(f"[{a + 1}, {b + 1}]" for a, b in combinations(range(len(shown)), 2))
        user = (
            f"{self.context_block(record, criterion, names)}"
            f"{blocks}\n\n"
            f"Criterion: {criterion.name}\n"
            + (f"{criterion.description}\n" if criterion.description and criterion.description != criterion.name
               else "")
            + f"\nCompare the responses on this criterion for each of these pairs: {pairs}. For every pair, reason "
            "about both responses, then name the better one. Answer with the JSON object "
            '{"comparisons": [{"responses": [<a>, <b>], "explanation": "<reasoning>", "winner": <a or b>}, ...]} '
            "with exactly one entry per pair."
        )
        return SYSTEM_PROMPT + fence_notice(self.nonce, "response_1"), user

    @staticmethod
    def checker(n: int) -> Callable[[PairwiseAnswer], PairwiseAnswer]:
        """Validation beyond the schema: every pair of the ``n`` responses compared once, winners in the pair."""
        expected = set(combinations(range(n), 2))

        def check(answer: PairwiseAnswer) -> PairwiseAnswer:
            for c in answer.comparisons:
                a, b = sorted(c.responses)
                if not (1 <= a <= n and 1 <= b <= n) or a == b:
                    raise AnswerError(f"pair {list(c.responses)} does not name two responses between 1 and {n}")
            verdicts = positions(answer)
            missing = sorted(expected - set(verdicts))
            if missing:
                shown = ", ".join(f"[{a + 1}, {b + 1}]" for a, b in missing)
                raise AnswerError(f"missing comparisons for pairs {shown}")
            return answer

        return check

    async def _run_order(self, record: Mapping[str, Any], criterion: Criteria, keys: list[str],
                         texts: list[str], order: list[int]) -> list[Structured[Verdicts]]:
        """Judge with responses shown in ``order``; verdicts come back keyed by response keys, pairs in key order."""
        shown = [texts[i] for i in order]
        payload = {"criterion": criterion.model_dump(), "shown": shown,
                   "context": {f: record[f] for f in criterion.context_fields}}
        raw = await self.sample(*self.messages(record, criterion, shown), PairwiseAnswer,
                                self.checker(len(keys)), payload)
        rank = {k: i for i, k in enumerate(keys)}
        mapped: list[Structured[Verdicts]] = []
        for outcome in raw:
            if outcome.value is None:
                mapped.append(Structured(None, outcome.unmeasured, outcome.usage, outcome.tries, outcome.answers))
                continue
            verdicts: Verdicts = {}
            for (a, b), (winner, why) in positions(outcome.value).items():
                ka, kb = sorted((keys[order[a]], keys[order[b]]), key=rank.__getitem__)
                verdicts[(ka, kb)] = (keys[order[winner]], why)
            mapped.append(Structured(verdicts, None, outcome.usage, outcome.tries, outcome.answers))
        return mapped

    def _combine(self, outcomes: list[Structured[Verdicts]]
                 ) -> tuple[Verdicts | None, str | None, Consistency | None]:
        samples = [o.value for o in outcomes if o.value is not None]
        consistency = None
        if self.self_consistency > 1:
            consistency = Consistency(samples=len(outcomes), measured_samples=len(samples), votes={})
        if not samples:
            return None, outcomes[0].unmeasured, consistency
        combined: dict[tuple[str, str], tuple[str, str]] = {}
        agreements: list[float] = []
        votes: dict[str, int] = {}
        for pair in samples[0]:
            winners = [s[pair][0] for s in samples]
            winner, agreement = majority_vote(winners)
            agreements.append(agreement)
            combined[pair] = next(s[pair] for s in samples if s[pair][0] == winner)
            for w in winners:
                label = f"{pair[0]} vs {pair[1]}: {w}"
                votes[label] = votes.get(label, 0) + 1
        if consistency is not None:
            consistency.votes = votes
            consistency.majority = {f"{a} vs {b}": w for (a, b), (w, _) in combined.items()}
            consistency.agreement_rate = sum(agreements) / len(agreements)
        return combined, None, consistency

    async def judge_one(self, record: Mapping[str, Any], criterion: Criteria, index: int = 0
                        ) -> PairwiseInstanceResult:
        pairs = _responses(record, criterion.to_evaluate_field, index)
        keys, texts = [k for k, _ in pairs], [t for _, t in pairs]
        forward = list(range(len(keys)))
        runs = [self._run_order(record, criterion, keys, texts, forward)]
        if self.check_positional_bias:
            runs.append(self._run_order(record, criterion, keys, texts, forward[::-1]))
        outcomes = await asyncio.gather(*runs)
        verdicts, error, consistency = self._combine(outcomes[0])
        tries = sum(o.tries for o in outcomes[0])
        bias = None
        if self.check_positional_bias:
            reverse_verdicts, reverse_error, _ = self._combine(outcomes[1])
            shown = ({f"{a} vs {b}": reverse_verdicts[(a, b)][0] for (a, b) in (verdicts or reverse_verdicts)}
                     if reverse_verdicts else None)
            if verdicts is None or reverse_verdicts is None:
                bias = PositionalBias(detected=None, error=error or reverse_error, reversed_verdict=shown)
            else:
                changed = any(verdicts[p][0] != reverse_verdicts[p][0] for p in verdicts)
                bias = PositionalBias(detected=changed, reversed_verdict=shown)
        if verdicts is None:
            return PairwiseInstanceResult(criteria=criterion.name, responses=keys, measured=False, error=error,
                                          tries=tries, positional_bias=bias, consistency=consistency)
        wins = {k: 0 for k in keys}
        for winner, _ in verdicts.values():
            wins[winner] += 1
        others = len(keys) - 1
        win_rates = {k: wins[k] / others for k in keys}
        ranking = sorted(keys, key=lambda k: (-wins[k], keys.index(k)))
        comparisons = [PairVerdict(first=a, second=b, winner=w, explanation=why)
                       for (a, b), (w, why) in verdicts.items()]
        return PairwiseInstanceResult(criteria=criterion.name, responses=keys, win_rates=win_rates, wins=wins,
                                      ranking=ranking, comparisons=comparisons, tries=tries,
                                      positional_bias=bias, consistency=consistency)

    def evaluate(self, records: Sequence[Mapping[str, Any]],
                 criteria: Criteria | str | Mapping[str, Any] | None = None) -> PairwiseResults:
        """Judge every record; each record's ``to_evaluate_field`` holds the responses to compare."""
        criterion = self._coerce(criteria) if criteria is not None else self.criteria
        if criterion is None:
            raise EvretError("judge 'pairwise': no criteria given; pass criteria=... to the judge or to evaluate()")
        records = list(records)
        self.nonce = new_nonce()
        self._cache_hits = 0
        self.check_fields(records, [criterion])
        for i, record in enumerate(records):
            _responses(record, criterion.to_evaluate_field, i)
        results: list[PairwiseInstanceResult] = self.run(
            [self.judge_one(r, criterion, i) for i, r in enumerate(records)])
        totals: dict[str, list[float]] = {}
        for r in results:
            for key, rate in r.win_rates.items():
                totals.setdefault(key, []).append(rate)
        win_rates = {k: sum(v) / len(v) for k, v in totals.items()}
        order = list(totals)
        ranking = sorted(order, key=lambda k: (-win_rates[k], order.index(k)))
        flags = [r.positional_bias.detected for r in results if r.positional_bias is not None]
        agreements = [r.consistency.agreement_rate for r in results if r.consistency is not None]
        return PairwiseResults(
            criteria=criterion.name, results=results, win_rates=win_rates, ranking=ranking,
            unmeasured=[i for i, r in enumerate(results) if not r.measured],
            positional_bias=bias_summary(flags) if self.check_positional_bias else None,
            agreement_rate=mean(agreements) if self.self_consistency > 1 else None,
            stats={"llm": self.usage()},
        )
