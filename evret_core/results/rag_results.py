"""RAG results: retrieval, generation and joint sections, per question and per condition.

A versioned schema of its own (``schema: "evret-rag"``, ``schema_version``), documented in ``docs/rag.md``; read,
checked and written by the shared :class:`~evret_core.results.model.Results` base, as retrieval results are.
Scores that do not apply (the citation precision of an answer without citations, the F1 of a question with only
gold ids) are ``null``, never 0, and are left out of the means; ``n`` says how many questions each mean covers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, field_serializer, model_serializer

from evret_core.contracts.errors import EvretError
from evret_core.contracts.generation import Answer
from evret_core.io.outputs import write_output
from evret_core.results.model import MEAN_TOLERANCE, Results, ScoreView, ValueCheck, metric_value_range
from evret_core.version import __version__

RAG_SCHEMA = "evret-rag"
RAG_SCHEMA_VERSION = 1

ATTRIBUTIONS = ("both_right", "retrieval_failure", "context_noise", "generator_failure", "unmeasured")
"""Per-question failure attribution from the gold and retrieved conditions:

- ``both_right``: right with gold context and with retrieved context;
- ``retrieval_failure``: right with gold, wrong with retrieved, and no gold document was retrieved;
- ``context_noise``: right with gold, wrong with retrieved, although a gold document was retrieved (the other
  retrieved documents misled the generator);
- ``generator_failure``: wrong even with the gold context;
- ``unmeasured``: an answer or a judgment is missing, or the question has no correctness label.
"""

CARRIED_FAILURE = "carried_failure"
"""The attribution of a conversation turn answered with the system's own history (``--history generated``) that is
right with gold, wrong under ``retrieved``, right again under ``retrieved`` with the dataset's reference history,
after an earlier wrong turn of its conversation (``carried_from``, the earliest such turn): the earlier failure
carried into it. Runs with generated history count it beside :data:`ATTRIBUTIONS`; other runs never have it."""


def attribution_labels(results: RagResults) -> tuple[str, ...]:
    """The attribution labels of ``results`` in order: :data:`ATTRIBUTIONS`, then ``carried_failure`` when the run
    counts it."""
    return (*ATTRIBUTIONS, CARRIED_FAILURE) if CARRIED_FAILURE in results.attribution else ATTRIBUTIONS


FAMILY_RATES: dict[str, tuple[str, ...]] = {
    "counterfactual": ("adopted", "corrected", "flagged_conflict", "correct"),
    "injection": ("leaked", "resisted", "correct"),
    "missing-gold": ("refused", "correct"),
    "irrelevant-only": ("refused", "correct"),
}
"""The rates of each adversarial family (:mod:`evret_core.rag.scores.adversarial_scores` says what each means)."""

_ANSWER, _DECLINE, _CLARIFY = ("answer",), ("refuse", "escalate"), ("clarify",)

DERIVED_SCORES: dict[str, tuple[tuple[str, ...], str]] = {
    "has_ans_exact": (_ANSWER, "exact"), "has_ans_f1": (_ANSWER, "f1"), "no_ans_exact": (_DECLINE, "exact"),
    "no_ans_f1": (_DECLINE, "f1"), "wrong_refusal_rate": (_ANSWER, "refused"),
    "correct_refusal_rate": (_DECLINE, "refused"), "clarify_rate": (_CLARIFY, "clarified"),
    "wrong_clarify_rate": (_ANSWER, "clarified"),
}
"""Generation rates over part of the questions: name -> (the expected behaviours of the questions it covers; the
per-question value it averages, see :func:`outcome_value`)."""

CLARIFY_RATES = ("clarify_rate", "wrong_clarify_rate")
"""The rates a run has only when a question expects a clarifying question or an answer asks one (a run of single
questions that never asks back has neither)."""


def outcome_value(outcome: ConditionOutcome, name: str) -> float | None:
    """The per-question value a generation mean averages: the score ``name``; ``clarified`` (not a stored score:
    the answer says it) is 1.0 when the answer asked the user which one they mean, 0.0 when it did not, None when
    the behaviour was not scored (no answer)."""
    if name == "clarified":
        scored = outcome.answer is not None and outcome.scores.get("behaviour_ok") is not None
        return float(outcome.answer.clarified) if scored and outcome.answer is not None else None
    return outcome.scores.get(name)


def asks_back(questions: Iterable[QuestionOutcome]) -> bool:
    """Whether a run has :data:`CLARIFY_RATES`: a question expects ``clarify`` or an answer asks the user back."""
    return any(oc.expected_behaviour == "clarify" or (oc.answer is not None and oc.answer.clarified)
               for q in questions for oc in q.conditions.values())


class ClaimResult(BaseModel):
    claim: str
    citations: list[str] = Field(default_factory=list)
    verdict: str
    supporting: list[str] = Field(default_factory=list)
    contradicting: list[str] = Field(default_factory=list)


class ConditionOutcome(BaseModel):
    """One question under one condition: the contexts given, the answer, the claim verdicts and the scores."""

    context_ids: list[str]
    expected_behaviour: str
    answer: Answer | None = None
    claims: list[ClaimResult] = Field(default_factory=list)
    scores: dict[str, float | None] = Field(default_factory=dict)
    correct: bool | None = None
    info: dict[str, Any] = Field(default_factory=dict)
    skipped: str | None = None

    @field_serializer("answer", mode="wrap")
    def _answer(self, answer: Answer | None, handler: SerializerFunctionWrapHandler) -> Any:
        """The answer's fields in order; ``clarified`` only when true, so an answer that asks nothing back is
        written as files before the field were (and such files write back byte for byte)."""
        data = handler(answer)
        if isinstance(data, dict) and not data.get("clarified", True):
            del data["clarified"]
        return data


class QuestionOutcome(BaseModel):
    """Everything about one question: its labels, its retrieval scores, and its outcome under each condition."""

    question_id: str
    question: str
    tags: dict[str, str] = Field(default_factory=dict)
    expected_behaviour: str
    answers: list[list[str]] = Field(default_factory=list)
    gold_doc_ids: list[str] = Field(default_factory=list)
    retrieved_ids: list[str] = Field(default_factory=list)
    retrieval: dict[str, float] | None = None
    gold_retrieved: bool | None = None
    conditions: dict[str, ConditionOutcome] = Field(default_factory=dict)
    attribution: str | None = None
    conversation_id: str | None = None
    turn_index: int | None = None
    carried_from: str | None = None

    @model_serializer(mode="wrap")
    def _written(self, handler: SerializerFunctionWrapHandler) -> Any:
        """Every field; the turn fields (``conversation_id``, ``turn_index``, ``carried_from``) only when set, so a
        question that is not a conversation turn is written as files before them were."""
        return _without_unset(handler(self), TURN_FIELDS)


TURN_FIELDS = ("conversation_id", "turn_index", "carried_from")
"""The fields of a :class:`QuestionOutcome` that only a turn of a conversation run has."""


def _without_unset(data: Any, keys: tuple[str, ...]) -> Any:
    """``data`` (a dumped model) without those of ``keys`` that are None or empty."""
    if isinstance(data, dict):
        for key in keys:
            if key in data and data[key] in (None, {}, []):
                del data[key]
    return data


class Difference(BaseModel):
    """``b - a`` of a metric over the questions measured under both conditions, with its paired bootstrap
    interval (questions resampled together, so the interval reflects the pairing)."""

    a: str
    b: str
    metric: str
    mean: float
    interval: list[float]
    n: int
    p_value: float | None = None

    @model_serializer(mode="wrap")
    def _written(self, handler: SerializerFunctionWrapHandler) -> Any:
        """``p_value`` only when set (conversation runs: the conversation-clustered paired test)."""
        return _without_unset(handler(self), ("p_value",))


class RagResults(Results):
    """The outcome of a RAG evaluation; see the module docs for the schema."""

    schema_: str = Field(default=RAG_SCHEMA, alias="schema")
    schema_version: int = RAG_SCHEMA_VERSION
    conditions: list[str]
    confidence_level: float = 0.95
    retrieval: dict[str, float] = Field(default_factory=dict)
    retrieval_intervals: dict[str, list[float]] = Field(default_factory=dict)
    generation: dict[str, dict[str, float | None]] = Field(default_factory=dict)
    generation_intervals: dict[str, dict[str, list[float]]] = Field(default_factory=dict)
    generation_n: dict[str, dict[str, int]] = Field(default_factory=dict)
    attribution: dict[str, int] = Field(default_factory=dict)
    attribution_by_turn_index: dict[str, dict[str, int]] = Field(default_factory=dict)
    differences: list[Difference] = Field(default_factory=list)
    slices: dict[str, dict[str, dict[str, dict[str, float | None]]]] = Field(default_factory=dict)
    adversarial: dict[str, Any] = Field(default_factory=dict)
    unmeasured: dict[str, Any] = Field(default_factory=dict)
    per_question: dict[str, QuestionOutcome] = Field(default_factory=dict)
    config: dict[str, Any] = Field(default_factory=dict)
    stats: dict[str, Any] = Field(default_factory=dict)

    model_config = {"populate_by_name": True}

    @model_serializer(mode="wrap")
    def _written(self, handler: SerializerFunctionWrapHandler) -> Any:
        """Every field; ``attribution_by_turn_index`` only for a conversation run (files of single questions are
        written as before it was)."""
        return _without_unset(handler(self), ("attribution_by_turn_index",))

    @property
    def clustered(self) -> bool:
        """Whether the questions are conversation turns: intervals and tests resample whole conversations."""
        return any(q.conversation_id is not None for q in self.per_question.values())

    KIND: ClassVar[str] = "rag"
    LABEL: ClassVar[str] = "RAG results"
    SCHEMA_VERSION: ClassVar[int] = RAG_SCHEMA_VERSION
    TEXT_SOURCE: ClassVar[str] = "RAG results"

    def to_json(self, path: str | Path | None = None, indent: int | None = 2) -> str:
        """The results as JSON (``schema`` first); with ``path``, also written there atomically. Keys and URL
        credentials in ``config`` and ``stats`` are redacted (:meth:`~evret_core.results.model.Results.redacted_sections`)."""
        text = self.json_text(indent)
        if path is not None:
            write_output(Path(path), text + "\n")
        return text

    def iter_json(self, indent: int | None = 2) -> Iterator[str]:
        written = self.model_copy(update=self.redacted_sections({"config": self.config, "stats": self.stats}))
        yield written.model_dump_json(indent=indent, by_alias=True) + "\n"

    @classmethod
    def check_document(cls, data: Any, source: str) -> None:
        if not isinstance(data, dict) or data.get("schema") != RAG_SCHEMA:
            raise EvretError(f"{source}: not an Evret RAG results file (no \"schema\": \"{RAG_SCHEMA}\")")

    @classmethod
    def validation_message(cls, source: str, problem: str) -> str:
        return f"{source}: {problem}"

    def check_values(self, source: str) -> None:
        check_rag_results(self, source)

    def score_view(self) -> ScoreView:
        """The gateable scores: ``retrieval/recall@5``, ``gold/f1``, ``retrieved/correct``...; per question, the
        scores that apply to it."""
        scores = {f"retrieval/{m}": v for m, v in self.retrieval.items()}
        intervals = {f"retrieval/{m}": v for m, v in self.retrieval_intervals.items()}
        for condition, means in self.generation.items():
            scores.update({f"{condition}/{m}": v for m, v in means.items() if v is not None})
            intervals.update({f"{condition}/{m}": v for m, v in self.generation_intervals.get(condition, {}).items()})
        per_query: dict[str, dict[str, float]] = {}
        for qid, q in self.per_question.items():
            row = {f"retrieval/{m}": v for m, v in (q.retrieval or {}).items()}
            for condition, outcome in q.conditions.items():
                row.update({f"{condition}/{m}": v for m, v in outcome.scores.items() if v is not None})
            per_query[qid] = row
        return ScoreView(scores, intervals, per_query)

    def manifest_dict(self) -> dict[str, Any]:
        """What reproduces the run (RAG files store no manifest: it is built from ``config``), redacted."""
        import platform

        from evret_core.io.redact import redact
        from evret_core.results.evaluation import _plugin_versions

        config = redact(self.config)
        return {"evret_version": __version__, "schema": self.schema_, "schema_version": self.schema_version,
                "num_questions": len(self.per_question), "conditions": list(self.conditions),
                **{part: config.get(part) for part in ("retriever", "generator", "claim_judge", "answer_judge",
                                                       "relevance", "retrieval_judge", "executor", "k", "seed",
                                                       "question_set")},
                "confidence_level": self.confidence_level, "plugins": _plugin_versions(),
                "python": platform.python_version(), "platform": platform.platform(terse=True)}

    def summary_rows(self) -> list[tuple[str, str, float | None]]:
        """``(condition, metric, mean)`` rows of the generation section, in condition order."""
        return [(c, m, v) for c in self.conditions for m, v in self.generation.get(c, {}).items()]


UNIT_SCORES = frozenset({"exact", "f1", "correct", "behaviour_ok", "refused", "answer_judge", "answer_relevance",
                         "groundedness", "faithfulness", "contradiction_rate", "citation_precision", "citation_recall",
                         "history_support_rate", "has_ans_exact", "has_ans_f1", "no_ans_exact", "no_ans_f1",
                         "wrong_refusal_rate", "correct_refusal_rate", "clarify_rate", "wrong_clarify_rate"})
"""The built-in generation scores and rates, each in [0, 1]; a plugin's RAG score is only checked finite."""


def _score_range(name: str) -> tuple[float, float] | None:
    section, _, metric = name.partition("/")
    if section == "retrieval":
        return metric_value_range(metric)
    return (0.0, 1.0) if metric in UNIT_SCORES else None


def check_rag_results(results: RagResults, source: str) -> None:
    """Refuse a RAG results file whose numbers cannot be what Evret wrote, as retrieval results are refused
    (:func:`evret_core.results.evaluation.check_results`): a per-question score that is NaN, infinite or outside its
    range, a ``per_question`` key holding another question's record, a mean (retrieval, or generation per
    condition, derived rates included) that is not the mean of the per-question values it covers or covers none, a
    count in ``generation_n`` that is not the number of those values, an interval that is not ``[low, high]`` with
    finite ``low <= high``, a confidence level outside (0, 1), attribution counts that are not the per-question
    attributions', differences and slices that are not recomputed from the per-question values, and an adversarial
    section whose rates, counts and drops do not follow from them. Errors name ``source``, where the number is and
    the question or score (``gold/f1``)."""
    check = ValueCheck(source, _score_range, unit="question")
    check.level(results.confidence_level, "confidence_level")
    retrieval: dict[str, list[float]] = {}
    scored = 0
    for qid, q in results.per_question.items():
        if q.question_id != qid:
            raise EvretError(f"{source}: per_question key {qid!r} holds the record of question {q.question_id!r}; "
                             f"the file was edited or damaged")
        scored += q.retrieval is not None
        for metric, value in (q.retrieval or {}).items():
            check.value(value, f"retrieval/{metric}", f"question {qid!r}")
            retrieval.setdefault(metric, []).append(value)
        for condition, outcome in q.conditions.items():
            for metric, score in outcome.scores.items():
                if score is not None:
                    check.value(score, f"{condition}/{metric}", f"question {qid!r}")
    for metric, mean in results.retrieval.items():
        check.value(mean, f"retrieval/{metric}", "retrieval")
        check.mean(mean, retrieval.get(metric, []), f"retrieval/{metric}", f"retrieval.{metric}", total=scored)
    for metric, interval in results.retrieval_intervals.items():
        check.interval(interval, f"retrieval/{metric}", f"retrieval_intervals.{metric}")
    check_generation(results, check)
    check_attribution(results, check)
    check_differences(results, check)
    check_rag_slices(results, check)
    check_adversarial(results, check)
    check_injection_scans(results.stats, check)


def generation_values(questions: Iterable[QuestionOutcome], condition: str, metric: str) -> list[float]:
    """The per-question values a generation mean covers: the questions measured under ``condition`` (those a
    derived rate covers, see :data:`DERIVED_SCORES`) that hold the score."""
    behaviours, score = DERIVED_SCORES.get(metric, (None, metric))
    out = []
    for q in questions:
        outcome = q.conditions.get(condition)
        if outcome is None or (behaviours is not None and outcome.expected_behaviour not in behaviours):
            continue
        value = outcome_value(outcome, score)
        if value is not None:
            out.append(float(value))
    return out


def check_generation(results: RagResults, check: ValueCheck) -> None:
    """Each generation mean (``None``: no question measured it) and count against its per-question values."""
    questions = list(results.per_question.values())
    for section in (results.generation, results.generation_intervals, results.generation_n):
        for condition in section:
            if condition not in results.conditions:
                raise check.fail(f"generation: no condition {condition} in this run")
    for condition, means in results.generation.items():
        for metric, generated in means.items():
            values = generation_values(questions, condition, metric)
            if generated is None:
                if values:
                    raise check.fail(f"generation.{condition}.{metric} is null but {len(values)} questions hold "
                                     f"{condition}/{metric}")
                continue
            check.value(generated, f"{condition}/{metric}", "generation")
            check.mean(generated, values, f"{condition}/{metric}", f"generation.{condition}.{metric}")
        for metric, interval in results.generation_intervals.get(condition, {}).items():
            check.interval(interval, f"{condition}/{metric}", f"generation_intervals.{condition}.{metric}")
    for condition, counts in results.generation_n.items():
        for metric, count in counts.items():
            held = len(generation_values(questions, condition, metric))
            if check.count(count, f"generation_n.{condition}.{metric}") != held:
                raise check.fail(f"generation_n.{condition}.{metric} is {count} but {held} questions have "
                                 f"{condition}/{metric}")


def attribution_by_turn_index(results: RagResults) -> dict[str, dict[str, int]]:
    """Per turn index (as a string, in numeric order), the count of each attribution among the turns with that
    index; empty unless the questions are conversation turns with attributions."""
    out: dict[int, dict[str, int]] = {}
    for q in results.per_question.values():
        if q.turn_index is None or q.attribution is None:
            continue
        row = out.setdefault(q.turn_index, dict.fromkeys(attribution_labels(results), 0))
        row[q.attribution] = row.get(q.attribution, 0) + 1
    return {str(index): out[index] for index in sorted(out)}


def check_attribution(results: RagResults, check: ValueCheck) -> None:
    """The attribution counts are whole numbers that sum to the number of questions and count the per-question
    attributions; every per-question attribution is one of :data:`ATTRIBUTIONS`; the counts per turn index are
    those of the turns' attributions."""
    if results.attribution_by_turn_index != attribution_by_turn_index(results):
        raise check.fail("attribution_by_turn_index does not count the per-question attributions by turn index")
    labels: dict[str, int] = {}
    known = attribution_labels(results)
    for qid, q in results.per_question.items():
        if (q.carried_from is not None) != (q.attribution == CARRIED_FAILURE):
            raise check.fail(f"question {qid!r}: carried_from is set exactly when the attribution is {CARRIED_FAILURE}")
        if q.carried_from is not None and q.carried_from not in results.per_question:
            raise check.fail(f"question {qid!r}: carried_from {q.carried_from!r} is not a question of the run")
        if q.attribution is None:
            continue
        if q.attribution not in known:
            raise check.fail(f"question {qid!r}: attribution {q.attribution!r} is not one of {', '.join(known)}")
        labels[q.attribution] = labels.get(q.attribution, 0) + 1
    if not results.attribution:
        return
    total = len(results.per_question)
    for label, count in results.attribution.items():
        if label not in known:
            raise check.fail(f"attribution.{label}: not an attribution (one of {', '.join(known)})")
        check.count(count, f"attribution.{label}", total)
    if sum(results.attribution.values()) != total:
        raise check.fail(f"attribution counts sum to {sum(results.attribution.values())} but the run has {total} "
                         f"questions")
    if labels:
        for label in known:
            if results.attribution.get(label, 0) != labels.get(label, 0):
                raise check.fail(f"attribution.{label} is {results.attribution.get(label, 0)} but "
                                 f"{labels.get(label, 0)} questions' per-question attribution is {label}")


def _span(name: str) -> tuple[float, float] | None:
    """The range of a difference of score ``name`` (``SECTION/METRIC``): minus to plus the width of its range."""
    limits = _score_range(name)
    return None if limits is None else (limits[0] - limits[1], limits[1] - limits[0])


def check_differences(results: RagResults, check: ValueCheck) -> None:
    """Each difference ``b - a`` has the mean and count of the per-question differences of the questions measured
    under both conditions (as :mod:`evret_core.rag.scores.summary` computes them)."""
    for d in results.differences:
        name = f"{d.metric} ({d.b} - {d.a})"
        where = f"differences: {name}"
        for condition in (d.a, d.b):
            if condition not in results.conditions:
                raise check.fail(f"{where}: no condition {condition} in this run")
        diffs = []
        for q in results.per_question.values():
            a, b = q.conditions.get(d.a), q.conditions.get(d.b)
            x = None if a is None else a.scores.get(d.metric)
            y = None if b is None else b.scores.get(d.metric)
            if x is not None and y is not None:
                diffs.append(float(y) - float(x))
        span = _span(f"{d.a}/{d.metric}")
        check.number(d.mean, f"{where}.mean", span)
        if d.n != len(diffs):
            raise check.fail(f"{where}.n is {d.n} but {len(diffs)} questions have both")
        check.mean(d.mean, diffs, name, f"{where}.mean")
        check.pair(d.interval, f"{where}.interval", span)
        if d.p_value is not None:
            check.number(d.p_value, f"{where}.p_value", (0.0, 1.0))


def check_rag_slices(results: RagResults, check: ValueCheck) -> None:
    """Each slice cell (tag value, condition) has the count of the questions carrying the tag value and, per score,
    the mean of their values (``None`` when none has one)."""
    members: dict[str, dict[str, list[QuestionOutcome]]] = {tag: {} for tag in results.slices}
    for q in results.per_question.values():
        for tag, value in q.tags.items():
            if tag in members:
                members[tag].setdefault(value, []).append(q)
    for tag, groups in results.slices.items():
        for group, by_condition in groups.items():
            where = f"slices.{tag}.{group}"
            questions = members[tag].get(group)
            if questions is None:
                raise check.fail(f"{where}: no question has {tag}={group!r}")
            for condition, cells in by_condition.items():
                if condition not in results.conditions:
                    raise check.fail(f"{where}.{condition}: no condition {condition} in this run")
                for metric, stored in cells.items():
                    at = f"{where}.{condition}.{metric}"
                    if metric == "n":
                        if stored != len(questions):
                            raise check.fail(f"{at} is {stored!r} but {len(questions)} questions have {tag}={group!r}")
                        continue
                    values = [float(s) for q in questions if (oc := q.conditions.get(condition)) is not None
                              and (s := oc.scores.get(metric)) is not None]
                    if stored is None:
                        if values:
                            raise check.fail(f"{at} is null but {len(values)} of its questions hold {metric}")
                        continue
                    check.value(stored, f"{condition}/{metric}", where)
                    check.mean(stored, values, f"{condition}/{metric}", at)


UNIT = (0.0, 1.0)


def check_adversarial(results: RagResults, check: ValueCheck) -> None:
    """Each adversarial condition's summary (:func:`evret_core.rag.scores.adversarial_scores.summarise_adversarial`)
    against its questions: its family, the counts of measured and skipped answers, rates in [0, 1] that are shares
    of the measured answers (``refused``, and ``correct`` outside the counterfactual family, recomputed from the
    per-question verdicts), the clean condition's wrong refusals, and the paired drop (its count and clean mean
    recomputed, ``delta`` = adversarial - clean). Slices are checked for range and arithmetic."""
    questions = list(results.per_question.values())
    for condition, entry in results.adversarial.items():
        where = f"adversarial.{condition}"
        if condition not in results.conditions:
            raise check.fail(f"{where}: no condition {condition} in this run")
        entry = check.table(entry, where)
        family = entry.get("family")
        if family not in FAMILY_RATES:
            raise check.fail(f"{where}.family is {family!r}, not one of {', '.join(FAMILY_RATES)}")
        outcomes = [(q, q.conditions[condition]) for q in questions if condition in q.conditions]
        families = sorted({str(oc.info["family"]) for _, oc in outcomes if oc.info.get("family") is not None})
        if families != [family]:
            raise check.fail(f"{where}.family is {family!r} but its questions' family is {', '.join(families)!r}")
        measured = [(q, oc) for q, oc in outcomes if oc.answer is not None and not oc.skipped]
        n = check.count(entry.get("n"), f"{where}.n", len(questions))
        if n != len(measured):
            raise check.fail(f"{where}.n is {n} but {len(measured)} answers were measured")
        skipped = sum(1 for _, oc in outcomes if oc.skipped)
        if check.count(entry.get("skipped"), f"{where}.skipped", len(questions)) != skipped:
            raise check.fail(f"{where}.skipped is {entry.get('skipped')} but {skipped} questions were skipped")
        _check_rates(entry, where, family, n, check)
        # refused or escalated, and not asking the user back (clarify beats both), as the behaviour score says
        for name, values in (("refused", [float(bool(oc.answer and (oc.answer.refused or oc.answer.escalated)
                                                     and not oc.answer.clarified)) for _, oc in measured]),
                             ("correct", [float(oc.correct) for _, oc in measured if oc.correct is not None])):
            if name in entry["rates"] and (name == "refused" or family != "counterfactual"):
                check.mean(entry["rates"][name], values, name, f"{where}.rates.{name}")
        clean = entry.get("clean")
        if clean is not None and clean not in results.conditions:
            raise check.fail(f"{where}.clean is {clean!r}, not a condition of this run")
        if "clean_wrong_refusal_rate" in entry:
            rate = check.number(entry["clean_wrong_refusal_rate"], f"{where}.clean_wrong_refusal_rate", UNIT)
            refusals = [float(s) for q in questions if (oc := q.conditions.get(str(clean))) is not None
                        and oc.expected_behaviour == "answer" and (s := oc.scores.get("refused")) is not None]
            check.mean(rate, refusals, "refused", f"{where}.clean_wrong_refusal_rate")
        if "drop" in entry:
            pairs = [(float(bool(a.correct)), float(bool(b.correct))) for q in questions
                     if (a := q.conditions.get(str(clean))) is not None and (b := q.conditions.get(condition)) is not None
                     and a.correct is not None and b.correct is not None and not a.skipped and not b.skipped]
            # the adversarial side of a counterfactual pair is the family's own verdict, judged from the answer's
            # text: only its range and arithmetic are checked
            _check_drop(entry["drop"], f"{where}.drop", len(questions), check, pairs,
                        f"both {clean} and {condition}", family != "counterfactual")
        for key, groups in check.table(entry.get("slices", {}), f"{where}.slices").items():
            for value, cell in check.table(groups, f"{where}.slices.{key}").items():
                at = f"{where}.slices.{key}.{value}"
                cell = check.table(cell, at)
                _check_rates(cell, at, family, check.count(cell.get("n"), f"{at}.n", n), check)
                if "drop" in cell:
                    _check_drop(cell["drop"], f"{at}.drop", len(questions), check)


def _check_rates(cell: dict[str, Any], where: str, family: str, n: int, check: ValueCheck) -> None:
    """A cell's rates: the family's, each in [0, 1] with an interval in [0, 1]; each but ``correct`` (which leaves
    out answers without a verdict) a share of the ``n`` measured answers."""
    rates = check.table(cell.get("rates"), f"{where}.rates")
    intervals = check.table(cell.get("intervals"), f"{where}.intervals")
    for name, value in rates.items():
        if name not in FAMILY_RATES[family]:
            raise check.fail(f"{where}.rates.{name}: not a rate of the {family} family "
                             f"({', '.join(FAMILY_RATES[family])})")
        rate = check.number(value, f"{where}.rates.{name}", UNIT)
        if name != "correct" and abs(rate * n - round(rate * n)) > MEAN_TOLERANCE * max(1, n):
            raise check.fail(f"{where}.rates.{name} is {rate!r}, not a share of the {n} measured answers")
    for name, interval in intervals.items():
        if name not in rates:
            raise check.fail(f"{where}.intervals.{name}: an interval of no rate")
        check.pair(interval, f"{where}.intervals.{name}", UNIT)


def _check_drop(drop: Any, where: str, questions: int, check: ValueCheck,
                pairs: list[tuple[float, float]] | None = None, under: str = "", both_sides: bool = False) -> None:
    """A paired drop: ``{"n": 0}``, or its count, the clean and adversarial means, ``delta`` = their difference
    and its interval; with ``pairs`` (the per-question (clean, adversarial) verdicts), its count and clean mean
    recomputed from them, and its adversarial mean too when ``both_sides``."""
    drop = check.table(drop, where)
    n = check.count(drop.get("n"), f"{where}.n", questions)
    if pairs is not None and n != len(pairs):
        raise check.fail(f"{where}.n is {n} but {len(pairs)} questions were measured under {under}")
    if not n:
        return
    clean = check.number(drop.get("clean"), f"{where}.clean", UNIT)
    adversarial = check.number(drop.get("adversarial"), f"{where}.adversarial", UNIT)
    if pairs is not None:
        check.mean(clean, [a for a, _ in pairs], "correct", f"{where}.clean")
        if both_sides:
            check.mean(adversarial, [b for _, b in pairs], "correct", f"{where}.adversarial")
    delta = check.number(drop.get("delta"), f"{where}.delta", (-1.0, 1.0))
    check.agree(delta, adversarial - clean, f"{where}.delta", "adversarial - clean")
    check.pair(drop.get("interval"), f"{where}.interval", (-1.0, 1.0))


def check_injection_scans(stats: dict[str, Any], check: ValueCheck) -> None:
    """The prompt-injection scans the report prints (``stats.llm.PART.injection``): whole counts, no more texts
    flagged than scanned."""
    for role, part in (stats.get("llm") or {}).items() if isinstance(stats.get("llm"), dict) else ():
        scan = part.get("injection") if isinstance(part, dict) else None
        if not isinstance(scan, dict):
            continue
        where = f"stats.llm.{role}.injection"
        scanned = check.count(scan.get("scanned", 0), f"{where}.scanned")
        check.count(scan.get("flagged", 0), f"{where}.flagged", scanned)
        for pattern, count in check.table(scan.get("patterns") or {}, f"{where}.patterns").items():
            check.count(count, f"{where}.patterns.{pattern}", scanned)


def clean(value: float | None) -> float | None:
    """``None`` for NaN or None, else the float: JSON has no NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return float(value)
