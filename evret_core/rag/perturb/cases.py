"""Adversarial conditions for the harness, and adversarial cases kept as JSONL (inspect, edit, reuse).

``adversarial_conditions(["counterfactual", "injection"], base="retrieved")`` gives one
:class:`~evret_core.rag.questions.conditions.PerturbedCondition` per family, named after it. :func:`build_cases` builds every
case of those conditions for a question set (seeded, so a run reproduces them), :func:`write_cases` writes them one
per line, and :func:`read_cases` reads such a file back as :class:`FixedCondition`s that replay the cases as written,
edits included. The file's SHA-256 goes into the run's config, so the results say which cases they scored.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from evret_core.contracts.errors import EvretError, did_you_mean
from evret_core.contracts.generation import Context
from evret_core.contracts.perturb import ConditionCase
from evret_core.contracts.retrieve import RetrievalResult
from evret_core.io.jsonio import iter_json_lines
from evret_core.io.outputs import write_output
from evret_core.rag.perturb.perturbations import FAMILIES
from evret_core.rag.questions.conditions import Condition, PerturbedCondition
from evret_core.rag.questions.question_sets import BEHAVIOURS, QuestionSet, RagQuestion


def adversarial_conditions(families: Sequence[str], base: str = "retrieved", seed: int = 0,
                           **options: Any) -> list[Condition]:
    """One perturbed condition per family (built-in, or registered by a plugin through ``register_perturbations``),
    over ``base`` contexts. ``options`` go to every family's factory that takes them (``templates``, ``positions``
    for injection); ``seed`` rotates injection's template and position assignment."""
    from evret_core.plugins.registry import create_perturbation, perturbation_names

    if not families:
        raise EvretError(f"no adversarial family given; use {', '.join(FAMILIES)}")
    out: list[Condition] = []
    for family in (f.strip() for f in families):
        if family not in perturbation_names():
            raise EvretError(f"unknown adversarial family {family!r}{did_you_mean(family, perturbation_names())}; "
                             f"use {', '.join(perturbation_names())} or "
                             f"install a plugin that registers it")
        wanted = {"seed": seed, **options} if family == "injection" else {}
        out.append(PerturbedCondition(family, create_perturbation(family, **wanted), base=base))
    return out


def build_cases(conditions: Sequence[Condition], questions: QuestionSet,
                retrieved: Sequence[Sequence[RetrievalResult]] | None, k: int, seed: int
                ) -> dict[str, list[ConditionCase]]:
    """Condition name -> one case per question, as the harness builds them."""
    if any(c.needs_retrieval for c in conditions) and retrieved is None:
        raise EvretError("these conditions perturb the retrieved contexts: pass the retrieved results")
    return {c.name: [c.case(q, questions, None if retrieved is None else retrieved[i], k, seed)
                     for i, q in enumerate(questions.questions)] for c in conditions}


def write_cases(path: str | Path, questions: QuestionSet, cases: dict[str, list[ConditionCase]]) -> str:
    """Write the cases, one JSON object per (condition, question); returns the file's SHA-256."""
    lines = []
    for condition, column in cases.items():
        for q, case in zip(questions.questions, column, strict=True):
            lines.append(json.dumps({
                "condition": condition, "question_id": q.question_id,
                "expected_behaviour": case.expected_behaviour, "skip": case.skip, "info": case.info,
                "contexts": [{"doc_id": c.doc_id, "text": c.text} for c in case.contexts],
            }, ensure_ascii=False))
    text = "".join(line + "\n" for line in lines)
    write_output(Path(path), text)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# info a replayed case must carry for its family's rates (adversarial_scores.outcome_scores): without it a rate
# would read as 0 (never adopted, never leaked) instead of being measured
_FAMILY_INFO = {"counterfactual": "planted_answer", "injection": "canary"}


class FixedCondition(Condition):
    """A condition whose cases were written down (by :func:`write_cases`, perhaps edited): replayed as they are.
    ``lines`` (question id -> "file:line") lets errors name the row of a case."""

    def __init__(self, name: str, cases: dict[str, ConditionCase], source: str, sha256: str,
                 lines: dict[str, str] | None = None) -> None:
        self.name = name
        self.cases = cases
        self.source = source
        self.sha256 = sha256
        self.lines = dict(lines or {})

    def case(self, question: RagQuestion, questions: QuestionSet, retrieved: Sequence[RetrievalResult] | None,
             k: int, seed: int) -> ConditionCase:
        found = self.cases.get(question.question_id)
        if found is None:
            return ConditionCase([], skip=f"no case for this question in {self.source}")
        return found

    def check_inputs(self, questions: QuestionSet, conditions: Sequence[str]) -> None:
        """A case for a question that is not in ``questions`` is an error naming its line (it would never be
        scored); questions without a case are reported as skipped by the run."""
        known = {q.question_id for q in questions.questions}
        unknown = [qid for qid in self.cases if qid not in known]
        if unknown:
            more = f" ({len(unknown)} such rows, e.g. also {unknown[1]!r})" if len(unknown) > 1 else ""
            raise EvretError(f"{self.lines.get(unknown[0], self.source)}: a case for question {unknown[0]!r}, "
                             f"which is not in the question set{more}")

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "cases": self.source, "sha256": self.sha256}


def read_cases(path: str | Path) -> list[FixedCondition]:
    """The conditions of a cases file, in file order; errors name the file and line.

    Each condition scores as one adversarial family: the ``info.family`` its rows give (all the same), or, when
    no row gives one, the condition's name if that is a family (``injection``...); a condition with neither is an
    error, so its adversarial rates are never silently missing. A counterfactual row needs ``info.planted_answer``
    and an injection row ``info.canary`` (unless it is skipped): its rates are computed from them."""
    from evret_core.plugins.registry import perturbation_names

    path = Path(path)
    by_condition: dict[str, dict[str, ConditionCase]] = {}
    lines: dict[str, dict[str, str]] = {}
    for _lineno, where, record in iter_json_lines(path, what="cases file"):
        if not isinstance(record, dict):
            raise EvretError(f"{where}: expected a JSON object")
        unknown = set(record) - {"condition", "question_id", "expected_behaviour", "skip", "info", "contexts"}
        if unknown:
            raise EvretError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
        condition, qid = record.get("condition"), record.get("question_id")
        if not isinstance(condition, str) or not condition or not isinstance(qid, str) or not qid:
            raise EvretError(f"{where}: 'condition' and 'question_id' must be non-empty strings")
        if condition in ("gold", "retrieved"):
            raise EvretError(f"{where}: condition {condition!r} is built in; a cases file holds other conditions")
        behaviour = record.get("expected_behaviour")
        if behaviour is not None and behaviour not in BEHAVIOURS:
            raise EvretError(f"{where}: expected_behaviour must be one of {', '.join(BEHAVIOURS)} or null")
        contexts = record.get("contexts")
        if not isinstance(contexts, list) or not all(
                isinstance(c, dict) and isinstance(c.get("doc_id"), str) and isinstance(c.get("text"), str)
                for c in contexts):
            raise EvretError(f"{where}: 'contexts' must be a list of {{\"doc_id\": str, \"text\": str}}")
        info = record.get("info") or {}
        skip = record.get("skip")
        if not isinstance(info, dict) or (skip is not None and not isinstance(skip, str)):
            raise EvretError(f"{where}: 'info' must be an object and 'skip' a string or null")
        if "family" in info and not (isinstance(info["family"], str) and info["family"]):
            raise EvretError(f"{where}: 'info.family' must be the name of an adversarial family")
        cases = by_condition.setdefault(condition, {})
        if qid in cases:
            raise EvretError(f"{where}: question {qid!r} has two cases for condition {condition!r}")
        cases[qid] = ConditionCase([Context(c["doc_id"], c["text"]) for c in contexts], behaviour, info, skip)
        lines.setdefault(condition, {})[qid] = where
    if not by_condition:
        raise EvretError(f"{path}: the cases file has no cases")
    families = perturbation_names()
    for condition, cases in by_condition.items():
        _settle_family(condition, cases, lines[condition], families)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return [FixedCondition(name, cases, str(path), digest, lines[name]) for name, cases in by_condition.items()]


def _settle_family(condition: str, cases: dict[str, ConditionCase], lines: dict[str, str],
                   families: Sequence[str]) -> None:
    """Give every case of ``condition`` its family (see :func:`read_cases`), or raise naming the row."""
    declared = {qid: case.info["family"] for qid, case in cases.items() if "family" in case.info}
    first = next(iter(lines.values()))
    family = next(iter(declared.values()), condition if condition in families else None)
    if family is None:
        raise EvretError(f"{first}: condition {condition!r} is not an adversarial family and its rows give no "
                         f"info.family, so no adversarial rates could be scored; add \"info\": {{\"family\": ...}} "
                         f"naming one of {', '.join(families)}")
    other = next((qid for qid, f in declared.items() if f != family), None)
    if other is not None:
        raise EvretError(f"{lines[other]}: info.family {declared[other]!r}, but condition {condition!r} is "
                         f"{family!r} on earlier rows; one condition holds one family")
    if family not in families:
        raise EvretError(f"{first}: info.family {family!r} is not an adversarial family; use "
                         f"{', '.join(families)} or install the plugin that registers it")
    needed = _FAMILY_INFO.get(family)
    for qid, case in cases.items():
        if "family" not in case.info:
            case = cases[qid] = replace(case, info={"family": family, **case.info})
        value = case.info.get(needed) if needed else "-"
        if case.skip is None and not (isinstance(value, str) and value.strip()):
            raise EvretError(f"{lines[qid]}: a {family} case needs info.{needed} (a non-empty string): its rates "
                             f"are scored from it")
