"""The ``cascade`` judge: cheap judges settle the clear judgments, expensive ones only the doubtful rest.

Stages run in order, each (by intent) cheaper than the next. Each stage but the last has an uncertainty band
``[low, high)`` over its score (shared contract 2: a score in [0, 1]): a score below ``low`` settles the judgment
as no match, a score at or above ``high`` as a match, and a score inside the band (or no score) sends it on. The
last stage settles everything it is given with its own verdict. A stage may have a budget, ``max_judgments`` or
``max_tokens`` (estimated with the stage's ``plan()``, as ``--dry-run`` does): judgments beyond it are never
sent, and those the budget leaves unsettled are unmeasured (None), never guessed.

**Graded cascades.** When the last stage is graded (:attr:`~evret_core.contracts.judge.Judge.grades`: the
``relevance`` judge, ``query-similarity``), every stage must grade on the same scale, and the cascade is graded too:
a judgment settled by a stage takes that stage's grade (a middle stage's band still reads its score; the stage is
asked for the grades of the judgments it settles only, which an LLM stage answers from its cache), and the verdict
is grade >= the last stage's ``cut``. The cascade is ``reference_free`` when every stage is.

``stats()`` reports, per stage, the judgments it scored and settled, the unmeasured ones, and the calls saved
against running the last stage alone; :meth:`CascadeJudge.settled_by` says which stage settled a judgment.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evret_core.contracts.errors import EvretError
from evret_core.contracts.judge import Judge, JudgmentContext
from evret_core.judge.thresholds import judge_scores, judge_threshold

_STAGE_KEYS = {"name", "band", "max_judgments", "max_tokens", "options"}


@dataclass
class Stage:
    """One judge of a cascade with its uncertainty band and budget."""

    judge: Any
    band: tuple[float, float] | None = None
    max_judgments: int | None = None
    max_tokens: int | None = None

    @property
    def name(self) -> str:
        return str(getattr(self.judge, "name", None) or type(self.judge).__name__)


def _band(value: Any, where: str) -> tuple[float, float]:
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise EvretError(f"cascade judge: {where}: 'band' must be [low, high], got {value!r}")
    try:
        low, high = float(value[0]), float(value[1])
    except (TypeError, ValueError):
        raise EvretError(f"cascade judge: {where}: 'band' must hold two numbers, got {value!r}") from None
    if not (math.isfinite(low) and math.isfinite(high)) or not 0.0 <= low <= high <= 1.0:
        raise EvretError(f"cascade judge: {where}: 'band' must satisfy 0 <= low <= high <= 1, got {value!r}")
    return low, high


def _budget(value: Any, key: str, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value < 0 \
            or value != int(value):
        raise EvretError(f"cascade judge: {where}: {key!r} must be a non-negative integer, got {value!r}")
    return int(value)


def _stage(spec: Any, index: int, last: bool) -> Stage:
    where = f"stage {index + 1}"
    if isinstance(spec, Stage):
        if (spec.band is None) != last:
            raise EvretError(f"cascade judge: {where}: every stage but the last, and only those, has a 'band'")
        return spec
    if isinstance(spec, str):
        spec = {"name": spec}
    if isinstance(spec, Judge) or (not isinstance(spec, Mapping) and hasattr(spec, "batch_judge")):
        judge, spec = spec, {}
    elif isinstance(spec, Mapping):
        spec = dict(spec)
        name = spec.pop("name", None)
        if not isinstance(name, str) or not name:
            raise EvretError(f"cascade judge: {where}: a stage is a judge name or a table with 'name'")
        if name == "cascade":
            raise EvretError(f"cascade judge: {where}: a cascade cannot contain a cascade")
        from evret_core.plugins.registry import create_judge

        options = dict(spec.pop("options", None) or {})
        options.update({k: v for k, v in spec.items() if k not in _STAGE_KEYS})
        spec = {k: v for k, v in spec.items() if k in _STAGE_KEYS}
        judge = create_judge(name, **options)
    else:
        raise EvretError(f"cascade judge: {where}: a stage is a judge name, a judge or a table with 'name', "
                         f"got {type(spec).__name__}")
    band = spec.get("band")
    if band is not None and last:
        raise EvretError(f"cascade judge: {where}: the last stage settles everything it gets and takes no 'band'")
    if band is None and not last:
        raise EvretError(f"cascade judge: {where}: every stage but the last needs a 'band' [low, high]")
    stage = Stage(judge=judge, band=None if band is None else _band(band, where),
                  max_judgments=_budget(spec.get("max_judgments"), "max_judgments", where),
                  max_tokens=_budget(spec.get("max_tokens"), "max_tokens", where))
    if stage.max_tokens is not None and not _estimates_tokens(judge):
        raise EvretError(f"cascade judge: {where}: 'max_tokens' needs a judge that estimates tokens (llm); "
                         f"use 'max_judgments' for {stage.name!r}")
    return stage


class CascadeJudge(Judge):
    """Ordered judges, each settling the judgments it is sure of (see the module docstring).

    :param stages: judge names, judge objects, or tables ``{"name": ..., "band": [low, high], "max_judgments":
        ..., "max_tokens": ..., **judge options}``; every stage but the last needs a band
    """

    name = "cascade"
    threshold = None

    def __init__(self, stages: Sequence[Any]) -> None:
        if isinstance(stages, (str, bytes)) or not isinstance(stages, Sequence) or len(stages) < 2:
            raise EvretError("cascade judge: 'stages' must list at least two judges, cheapest first")
        self.stages = [_stage(s, i, i == len(stages) - 1) for i, s in enumerate(stages)]
        last = self.stages[-1].judge
        #: the last stage's scale: a graded cascade grades 0..grades, and every stage on that scale
        self.grades: int | None = getattr(last, "grades", None)
        self.cut: float | None = getattr(last, "cut", None) if self.grades is not None else None
        #: true when no stage reads the expected answer
        self.reference_free = all(bool(getattr(s.judge, "reference_free", False)) for s in self.stages)
        if self.grades is not None:
            for index, stage in enumerate(self.stages[:-1]):
                grades = getattr(stage.judge, "grades", None)
                if grades != self.grades:
                    scale = "yes/no" if grades is None else f"0-{grades}"
                    raise EvretError(
                        f"cascade judge: stage {index + 1} ({stage.name!r}) judges {scale}, but the last stage "
                        f"grades 0-{self.grades}: every stage of a graded cascade must grade on the same scale")
        self._settled: dict[JudgmentContext, str] = {}
        self.reset_stats()

    # -- judging -------------------------------------------------------------------------------------------
    def judge(self, context: JudgmentContext) -> bool:
        verdict = self.batch_judge([context])[0]
        if verdict is None:
            raise EvretError("cascade judge: the judgment was left unsettled (budget spent or a stage failed)")
        return verdict

    def prepare(self, contexts: Sequence[JudgmentContext]) -> None:
        # only the first stage sees every context; preparing later stages would do the work the cascade saves
        prepare = getattr(self.stages[0].judge, "prepare", None)
        if callable(prepare):
            prepare(contexts)

    def batch_judge(self, contexts: Sequence[JudgmentContext]) -> list[bool | None]:
        """Each context's verdict: the first stage sure of it settles it (a graded cascade: grade >= cut)."""
        return self._run(contexts)[0]

    def batch_grade(self, contexts: Sequence[JudgmentContext]) -> list[float | None]:
        """A graded cascade's grade per context: the grade of the stage that settled it (None: unsettled). A
        yes/no cascade's verdicts as 1.0 / 0.0."""
        if self.grades is None:
            return super().batch_grade(contexts)
        return self._run(contexts)[1]

    def _run(self, contexts: Sequence[JudgmentContext]) -> tuple[list[bool | None], list[float | None]]:
        graded = self.grades is not None
        verdicts: list[bool | None] = [None] * len(contexts)
        grades: list[float | None] = [None] * len(contexts)
        pending = list(range(len(contexts)))
        self._counts["judgments"] += len(contexts)
        for index, stage in enumerate(self.stages):
            if not pending:
                break
            counts = self._counts["stages"][index]
            sent = self._within_budget(index, stage, [contexts[i] for i in pending])
            skipped, pending = pending[sent:], pending[:sent]
            counts["over_budget"] += len(skipped)
            batch = [contexts[i] for i in pending]
            counts["scored"] += len(batch)
            last = stage.band is None
            if graded and last:
                answers: list[Any] = list(stage.judge.batch_grade(batch))
            elif last and judge_threshold(stage.judge) is None:
                answers = list(stage.judge.batch_judge(batch))
            else:
                answers = judge_scores(stage.judge, batch)
            if len(answers) != len(batch):
                raise EvretError(f"cascade judge: stage {stage.name!r} returned {len(answers)} answers for "
                                 f"{len(batch)} contexts")
            if graded:
                settled, carry = self._settle_grades(stage, pending, batch, answers)
            else:
                settled = []
                carry = []
                for i, answer in zip(pending, answers, strict=True):
                    verdict = self._settle(stage, answer)
                    if verdict is None:
                        carry.append(i)
                    else:
                        settled.append((i, verdict, None))
            for i, verdict, grade in settled:
                verdicts[i], grades[i] = verdict, grade
                self._settled[contexts[i]] = stage.name
                counts["settled"] += 1
            # judgments skipped for budget at a middle stage go on: a later stage may still settle them
            pending = carry + skipped if not last else []
            if last:
                counts["unmeasured"] += len(carry) + len(skipped)
        return verdicts, grades

    def _settle_grades(self, stage: Stage, pending: list[int], batch: list[JudgmentContext],
                       answers: list[Any]) -> tuple[list[tuple[int, bool, float | None]], list[int]]:
        """A graded stage's settled judgments ``(index, grade >= cut, grade)`` and those it sends on. The last
        stage's answers are grades; a middle stage's are scores against its band, and the stage is asked for the
        grades of only the judgments its band settles."""
        cut = self.cut if self.cut is not None else 1
        if stage.band is None:
            sure = [(i, a) for i, a in zip(pending, answers, strict=True) if a is not None]
            carry = [i for i, a in zip(pending, answers, strict=True) if a is None]
            return [(i, float(g) >= cut, float(g)) for i, g in sure], carry
        low, high = stage.band
        outside = [(i, c) for i, c, a in zip(pending, batch, answers, strict=True)
                   if a is not None and (a < low or a >= high)]
        carry = [i for i, a in zip(pending, answers, strict=True) if a is None or low <= a < high]
        got = list(stage.judge.batch_grade([c for _, c in outside])) if outside else []
        if len(got) != len(outside):
            raise EvretError(f"cascade judge: stage {stage.name!r} returned {len(got)} grades for "
                             f"{len(outside)} contexts")
        settled: list[tuple[int, bool, float | None]] = []
        ungraded: set[int] = set()
        for (i, _), grade in zip(outside, got, strict=True):
            if grade is None:  # no grade after all: a later stage decides
                ungraded.add(i)
            else:
                settled.append((i, float(grade) >= cut, float(grade)))
        if ungraded:  # in the order they came, as the budgets of later stages take a prefix
            sent_on = ungraded | set(carry)
            carry = [i for i in pending if i in sent_on]
        return settled, carry

    def _settle(self, stage: Stage, answer: Any) -> bool | None:
        if answer is None:
            return None
        if stage.band is None:  # the last stage: its verdict, or its score against its threshold
            if isinstance(answer, bool):
                return answer
            threshold = judge_threshold(stage.judge)
            return bool(answer >= threshold) if threshold is not None else bool(answer >= 0.5)
        low, high = stage.band
        if answer < low:
            return False
        if answer >= high:
            return True
        return None

    def _within_budget(self, index: int, stage: Stage, batch: Sequence[JudgmentContext]) -> int:
        """How many of ``batch`` (a prefix) this stage may still take under its budget."""
        counts = self._counts["stages"][index]
        allowed = len(batch)
        if stage.max_judgments is not None:
            allowed = min(allowed, max(0, stage.max_judgments - counts["scored"]))
        if stage.max_tokens is not None:
            plan = stage.judge.plan
            left = stage.max_tokens - counts["estimated_tokens"]
            taken = 0
            for context in batch[:allowed]:
                estimate = plan([context])
                tokens = int(estimate.get("estimated_input_tokens", 0)) + int(
                    estimate.get("estimated_output_tokens_max", 0))
                if tokens > left:
                    break
                left -= tokens
                taken += 1
                counts["estimated_tokens"] += tokens
            allowed = taken
        return allowed

    def settled_by(self, context: JudgmentContext) -> str | None:
        """The name of the stage that settled ``context`` (None when unsettled or never judged)."""
        return self._settled.get(context)

    # -- accounting ----------------------------------------------------------------------------------------
    def reset_stats(self) -> None:
        """Start counting afresh (the evaluator calls this per run), for the cascade and every stage."""
        self._settled.clear()
        self._counts: dict[str, Any] = {
            "judgments": 0,
            "stages": [{"scored": 0, "settled": 0, "unmeasured": 0, "over_budget": 0, "estimated_tokens": 0}
                       for _ in self.stages],
        }
        for stage in self.stages:
            reset = getattr(stage.judge, "reset_stats", None)
            if callable(reset):
                reset()

    def stats(self) -> dict[str, Any]:
        """Per stage: judgments scored, settled, unmeasured; the calls the last stage was spared; the stages' own
        stats (an LLM stage's ``cost`` is also lifted to ``stats()["cost"]`` for the results)."""
        total = self._counts["judgments"]
        stages = []
        cost: dict[str, Any] = {}
        for stage, counts in zip(self.stages, self._counts["stages"], strict=True):
            entry: dict[str, Any] = {"judge": stage.name, "band": None if stage.band is None else list(stage.band),
                                     **{k: v for k, v in counts.items() if v or k in ("scored", "settled")}}
            inner = getattr(stage.judge, "stats", None)
            if callable(inner):
                entry["stats"] = inner()
                if isinstance(entry["stats"], dict) and isinstance(entry["stats"].get("cost"), dict):
                    cost.update(entry["stats"]["cost"])
            stages.append(entry)
        last = self._counts["stages"][-1]
        out: dict[str, Any] = {
            "judgments": total,
            "stages": stages,
            "settled_by": {s["judge"]: s["settled"] for s in stages},
            "unmeasured": last["unmeasured"],
            "last_judge_calls": last["scored"],
            "last_judge_calls_saved": total - last["scored"],
            "last_judge_fraction": (last["scored"] / total) if total else 0.0,
        }
        if cost:
            out["cost"] = cost
        return out

    def pinned_options(self, options: Mapping[str, Any],
                       pin: Callable[[Any, Mapping[str, Any]], dict[str, Any]]) -> dict[str, Any]:
        """``options`` (this cascade's, as it was made by name) with each stage made by name given as a table whose
        ``options`` are ``pin(stage judge, its options)``: how a recipe pins an LLM stage's answer cache to the file
        this process uses (:func:`~evret_core.plugins.recipes.recipe_of`), so that every worker shares it."""
        specs = options.get("stages")
        if isinstance(specs, (str, bytes)) or not isinstance(specs, Sequence) or len(specs) != len(self.stages):
            return dict(options)
        out: list[Any] = []
        for spec, stage in zip(specs, self.stages, strict=True):
            table: Any = {"name": spec} if isinstance(spec, str) else spec
            if not isinstance(table, Mapping) or not isinstance(table.get("name"), str):
                out.append(spec)  # a judge object travels as itself
                continue
            inner = dict(table.get("options") or {})
            inner.update({k: v for k, v in table.items() if k not in _STAGE_KEYS})  # as _stage reads them
            pinned = pin(stage.judge, inner)
            out.append(spec if pinned == inner and isinstance(spec, str) else
                       {**{k: v for k, v in table.items() if k in _STAGE_KEYS}, "options": pinned})
        return {**options, "stages": out}

    def config(self) -> dict[str, Any]:
        stages = []
        for stage in self.stages:
            inner = getattr(stage.judge, "config", None)
            entry: dict[str, Any] = dict(inner()) if callable(inner) else {"name": stage.name}
            if stage.band is not None:
                entry["band"] = list(stage.band)
            for key in ("max_judgments", "max_tokens"):
                if getattr(stage, key) is not None:
                    entry[key] = getattr(stage, key)
            stages.append(entry)
        return {"name": self.name, "stages": stages}


def _estimates_tokens(judge: Any) -> bool:
    """Whether the judge's ``plan`` estimates tokens (the base class's default plan estimates none)."""
    from evret_core.contracts.judge import Judge

    plan = getattr(type(judge), "plan", None)
    return callable(plan) and plan is not getattr(Judge, "plan", None)
