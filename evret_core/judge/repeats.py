"""The ``repeats`` judge: N samples of one judge per judgment, the majority verdict and how much they agreed.

Built for LLM judges, whose answers change run to run (temperature > 0) or with the wording of the prompt: each
sample is its own judge, and a judge with a ``system_prompt`` (``llm``) gets a distinct one-line suffix per sample,
so that every sample is its own call and its own cache entry (a rerun reads all N back from the cache). The verdict
is the majority of the samples that answered; a tie, or no answer at all, is unmeasured (None), never guessed.

Samples of a graded judge (``relevance``: :attr:`~evret_core.contracts.judge.Judge.grades`) give the median of the
grades that came back (an even count: the lower of the two middle grades, so a split never rounds up), and the
verdict is that grade at the judge's ``cut``; a judgment's agreement rate is the share of the answers equal to the
median.

``stats()`` gives the overall agreement rate (mean over judgments of the share of answers that agree with the
majority), how many judgments were unanimous and how many tied; :meth:`RepeatedJudge.agreement` gives one
judgment's rate. Written against the current :class:`~evret_core.judge.llm.LLMJudge`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evret_core.contracts.errors import EvretError
from evret_core.contracts.judge import Judge, JudgmentContext


class RepeatedJudge(Judge):
    """``repeats`` samples of the judge registered as ``judge`` (built with ``options``), majority verdict."""

    name = "repeats"

    def __init__(self, judge: str = "llm", repeats: int = 3, options: dict[str, Any] | None = None) -> None:
        from evret_core.plugins.registry import create_judge

        if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 2:
            raise EvretError(f"repeats judge: 'repeats' must be an integer >= 2 (odd avoids ties), got {repeats!r}")
        if not isinstance(judge, str) or judge in ("repeats", "cascade"):
            raise EvretError(f"repeats judge: 'judge' must name a plain registered judge, got {judge!r}")
        if options is not None and not isinstance(options, dict):
            raise EvretError("repeats judge: 'options' must be a table of the sampled judge's options")
        self.judge_name = judge
        self.repeats = repeats
        self.options = dict(options or {})
        self.samples = [create_judge(judge, **self.options) for _ in range(repeats)]
        for i, sample in enumerate(self.samples):
            prompt = getattr(sample, "system_prompt", None)
            if isinstance(prompt, str):  # an LLM judge (Judge has no prompt): each sample judges independently
                sample.system_prompt = (  # type: ignore[attr-defined]
                    prompt + f"\n(Independent judgment, sample {i + 1} of {repeats}.)")
        first = self.samples[0]
        #: a graded sampled judge makes a graded repeats judge, on its scale and cut
        self.grades: int | None = getattr(first, "grades", None)
        self.cut: float | None = getattr(first, "cut", None) if self.grades is not None else None
        self.reference_free: bool = bool(getattr(first, "reference_free", False))
        self._agreement: dict[JudgmentContext, float] = {}
        self.reset_stats()

    def judge(self, context: JudgmentContext) -> bool:
        verdict = self.batch_judge([context])[0]
        if verdict is None:
            raise EvretError("repeats judge: no majority (a tie, or no sample answered)")
        return verdict

    def prepare(self, contexts: Sequence[JudgmentContext]) -> None:
        for sample in self.samples:
            prepare = getattr(sample, "prepare", None)
            if callable(prepare):
                prepare(contexts)

    def batch_grade(self, contexts: Sequence[JudgmentContext]) -> list[float | None]:
        """A graded judge's grade per context: the median of the samples' grades (an even count: the lower of the
        two middle ones), None when no sample answered. A yes/no judge's verdicts as 1.0 / 0.0."""
        if self.grades is None:
            return super().batch_grade(contexts)
        answers = [list(sample.batch_grade(contexts)) for sample in self.samples]
        out: list[float | None] = []
        for i, context in enumerate(contexts):
            said = sorted(float(g) for a in answers if (g := a[i]) is not None)
            if not said:
                out.append(None)
                self._counts["unanswered"] += 1
                continue
            median = said[(len(said) - 1) // 2]
            out.append(median)
            agree = sum(1 for g in said if g == median)
            self._record(context, agree / len(said))
            self._counts["unanimous"] += int(agree == len(said))
        return out

    def batch_judge(self, contexts: Sequence[JudgmentContext]) -> list[bool | None]:
        if self.grades is not None:  # the median grade at the cut
            cut = self.cut if self.cut is not None else 1
            return [None if g is None else g >= cut for g in self.batch_grade(contexts)]
        answers = [list(sample.batch_judge(contexts)) for sample in self.samples]
        out: list[bool | None] = []
        for i, context in enumerate(contexts):
            said = [a[i] for a in answers if a[i] is not None]
            yes = sum(1 for v in said if v)
            no = len(said) - yes
            if not said or yes == no:
                out.append(None)
                self._counts["ties" if said else "unanswered"] += 1
                if said:
                    self._record(context, 0.5)
                continue
            out.append(yes > no)
            self._record(context, max(yes, no) / len(said))
            self._counts["unanimous"] += int(yes == 0 or no == 0)
        return out

    def _record(self, context: JudgmentContext, rate: float) -> None:
        self._agreement[context] = rate
        self._counts["judgments"] += 1
        self._counts["agreement_sum"] += rate

    def agreement(self, context: JudgmentContext) -> float | None:
        """The share of the answers to ``context`` that agreed with the majority (None: never judged or no answer)."""
        return self._agreement.get(context)

    def reset_stats(self) -> None:
        """Start counting afresh, for this judge and every sample."""
        self._agreement.clear()
        self._counts: dict[str, Any] = {"judgments": 0, "agreement_sum": 0.0, "unanimous": 0, "ties": 0,
                                        "unanswered": 0}
        for sample in self.samples:
            reset = getattr(sample, "reset_stats", None)
            if callable(reset):
                reset()

    def stats(self) -> dict[str, Any]:
        """Repeats, overall agreement rate, unanimous / tied / unanswered counts, and the samples' summed cost."""
        counts = self._counts
        cost: dict[str, dict[str, Any]] = {}
        for sample in self.samples:
            inner = getattr(sample, "stats", None)
            got = inner() if callable(inner) else {}
            for provider, usage in (got.get("cost") or {}).items():
                total = cost.setdefault(provider, {})
                for key, value in usage.items():
                    if isinstance(value, (int, float)) and not isinstance(value, bool):
                        total[key] = total.get(key, 0) + value
                    else:
                        total[key] = value
        out: dict[str, Any] = {
            "repeats": self.repeats,
            "judgments": counts["judgments"],
            "agreement_rate": counts["agreement_sum"] / counts["judgments"] if counts["judgments"] else None,
            "unanimous": counts["unanimous"],
            "ties": counts["ties"],
            "unanswered": counts["unanswered"],
        }
        if cost:
            out["cost"] = cost
        return out

    def config(self) -> dict[str, Any]:
        inner = getattr(self.samples[0], "config", None)
        return {"name": self.name, "repeats": self.repeats,
                "judge": inner() if callable(inner) else {"name": self.judge_name}}
