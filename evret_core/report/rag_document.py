"""The RAG report as a document of titled tables, and the per-question drill-down of its HTML page.

:func:`rag_sections` computes what the report says once (retrieval, generation per condition, failure
attribution, condition differences, slices, adversarial rates, the comparison of runs), :func:`condition_differences`
the differences table (one row per pair of conditions, a column per metric) and :func:`question_drilldown` with
:func:`verdict` what the page shows per question; the report's renderers lay them out, the same ones as
retrieval reports' (:func:`evret_core.report.render.render_report` with a :class:`~evret_core.report.common.RagReportData`:
:mod:`evret_core.report.markdown`, :mod:`evret_core.report.html`). Every text from a results file (run names, tags,
tag values, condition names) is escaped by the renderer: pipes and brackets in Markdown cells, HTML autoescaping
in the page.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evret_core.rag.questions.question_sets import QuestionSet
from evret_core.report.rag_tables import carried_pairs, generation_rows, turn_index_labels, turn_index_rows
from evret_core.results.rag_results import ConditionOutcome, RagResults, attribution_labels
from evret_core.statistics.inference import Comparison, format_interval

__all__ = ["PairDifference", "Section", "condition_differences", "question_drilldown", "rag_sections", "verdict"]

MAX_QUESTIONS = 1000  # questions in the HTML drill-down; the results file holds them all
PREVIEW_CHARS = 160  # of each context text, in the question's list (the whole text is at the page's end)

SLICE_METRICS = ("exact", "f1", "correct", "refused")


@dataclass
class Section:
    """A heading (``level`` 2 or 3), an optional note and an optional table (header and rows of cell texts)."""

    level: int
    title: str
    note: str = ""
    header: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)


def cell(value: Any, interval: Sequence[float] | None = None) -> str:
    """A score with its interval, or ``n/a`` when the run did not measure it."""
    return "n/a" if value is None else format_interval(float(value), interval)


@dataclass
class PairDifference:
    """One pair of conditions in the differences table: ``b - a`` per metric (mean, low, high) and the questions
    both measured. A pair with the clean condition is turned to read ``condition - clean`` (as the terminal's
    compact table does), the others keep the results file's ``b - a``."""

    a: str
    b: str
    against_clean: bool
    cells: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    n: dict[str, int] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.b} - {self.a}" if not self.against_clean else f"{self.a} - {self.b}"

    @property
    def n_text(self) -> str:
        """The questions behind the pair: one number when every metric has the same, else the range."""
        counts = sorted(set(self.n.values()))
        return "" if not counts else str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"

    def text(self, metric: str) -> str:
        found = self.cells.get(metric)
        return "n/a" if found is None else format_interval(found[0], [found[1], found[2]])


def condition_differences(r: RagResults) -> list[PairDifference]:
    """The run's paired differences, one entry per pair of conditions with a cell per metric: each condition
    against the clean one first (``retrieved``, else ``gold``; the terminal's compact table), then every other
    pair in the results file's order. ``+ 0.0`` keeps a flipped zero from printing as ``-0.000``."""
    from evret_core.report.rag_tables import clean_condition

    clean = clean_condition(r.conditions)
    pairs: dict[tuple[str, str], PairDifference] = {}
    for d in r.differences:
        if clean is not None and clean in (d.a, d.b):
            other = d.b if d.a == clean else d.a
            mean, low, high = ((d.mean, d.interval[0], d.interval[1]) if d.a == clean
                               else (-d.mean, -d.interval[1], -d.interval[0]))
            pair = pairs.setdefault((other, clean), PairDifference(other, clean, True))
        else:
            mean, low, high = d.mean, d.interval[0], d.interval[1]
            pair = pairs.setdefault((d.a, d.b), PairDifference(d.a, d.b, False))
        pair.cells[d.metric] = (mean + 0.0, low + 0.0, high + 0.0)
        pair.n[d.metric] = d.n
    order = {c: i for i, c in enumerate(r.conditions)}
    first = sorted((p for p in pairs.values() if p.against_clean), key=lambda p: order.get(p.a, len(order)))
    return first + [p for p in pairs.values() if not p.against_clean]


def _run_sections(name: str, r: RagResults) -> list[Section]:
    level = f"{r.confidence_level:.0%} CI"
    out = [Section(2, name, f"{len(r.per_question)} questions; conditions: {', '.join(r.conditions)}.")]
    if r.retrieval:
        out.append(Section(3, f"Retrieval (retrieved condition, {level})", header=["metric", "value"],
                           rows=[[m, cell(v, r.retrieval_intervals.get(m))] for m, v in r.retrieval.items()]))
    rows = [[metric] + [cell(r.generation.get(c, {}).get(metric), r.generation_intervals.get(c, {}).get(metric))
                        for c in r.conditions]
            for metric in generation_rows(r) if any(metric in r.generation.get(c, {}) for c in r.conditions)]
    out.append(Section(3, f"Generation ({level})", header=["metric", *r.conditions], rows=rows))
    if r.attribution:
        total = sum(r.attribution.values()) or 1
        out.append(Section(3, "Failure attribution", header=["outcome", "questions", "share"],
                           rows=[[label, str(r.attribution.get(label, 0)), f"{r.attribution.get(label, 0) / total:.1%}"]
                                 for label in attribution_labels(r)]))
    if r.attribution_by_turn_index:
        labels = turn_index_labels(r)
        out.append(Section(3, "Failure attribution by turn index", "Turns of each index in their conversation.",
                           header=["turn", *labels], rows=turn_index_rows(r, labels)))
    if carried_pairs(r):
        out.append(Section(3, "Carried failures", "Each turn wrong with the system's own history and right with the "
                           "dataset's, after the earlier wrong turn it carried from.",
                           header=["carried from", "turn"], rows=[list(p) for p in carried_pairs(r)]))
    pairs = condition_differences(r)
    if pairs:
        metrics = list(dict.fromkeys(m for p in pairs for m in p.cells))
        clean = pairs[0].b if pairs[0].against_clean else None
        others = ", then every other pair" if not pairs[-1].against_clean else ""
        unit = "conversation-clustered bootstrap" if r.clustered else "paired bootstrap"
        note = (f"Each condition minus {clean}{others}; " if clean else "") + \
            f"{unit} {level} over the questions both conditions measured (n)."
        out.append(Section(3, "Differences between conditions", note, header=["difference", "n", *metrics],
                           rows=[[p.label, p.n_text] + [p.text(m) for m in metrics] for p in pairs]))
    for tag, values in r.slices.items():
        out.append(Section(3, f"Slices by {tag}", header=["value", "condition", *SLICE_METRICS],
                           rows=[[value, condition] + [cell(scores.get(m)) for m in SLICE_METRICS]
                                 for value, by_condition in values.items()
                                 for condition, scores in by_condition.items()]))
    scans = {role: part["injection"] for role, part in (r.stats.get("llm") or {}).items()
             if isinstance(part, dict) and isinstance(part.get("injection"), dict)}
    if scans:  # the LLM parts' prompt-injection scan of the contexts they sent (docs/llm-judging.md)
        out.append(Section(3, "Prompt injections in the contexts sent to the LLM",
                           "Texts matching the detector's patterns; the answers and verdicts are the model's.",
                           ["part", "distinct texts scanned", "flagged", "patterns", "example"],
                           [[role, str(scan.get("scanned", 0)), str(scan.get("flagged", 0)),
                             ", ".join(f"{k} {v}" for k, v in (scan.get("patterns") or {}).items()) or "none",
                             str((scan.get("examples") or [{}])[0].get("match", ""))]
                            for role, scan in scans.items()]))
    for condition, entry in r.adversarial.items():
        rows = [[rate, cell(v, entry["intervals"].get(rate))] for rate, v in entry["rates"].items()]
        drop = entry.get("drop") or {}
        if drop.get("n"):
            rows.append([f"correct vs {entry['clean']}", cell(drop["delta"], drop["interval"])])
        out.append(Section(3, f"Adversarial: {condition} ({entry['family']}, n={entry.get('n', 0)})",
                           header=["rate", "value"], rows=rows))
    return out


def rag_sections(runs: Mapping[str, RagResults], comparison: Comparison | None = None) -> list[Section]:
    """Everything the report of ``runs`` shows, in order (see the module)."""
    out: list[Section] = []
    for name, r in runs.items():
        out += _run_sections(name, r)
    if comparison is not None:
        out.append(Section(2, "Comparison", f"{comparison.test} test, Holm-Bonferroni over {len(comparison.pairs)} "
                           f"comparisons; * = adjusted p < {comparison.alpha:g}",
                           ["metric", "pair", "delta", "n", "p (adjusted)"],
                           [[p.metric, f"{p.b} vs {p.a}", f"{p.delta:+.4f}", str(p.n),
                             f"{p.p_adjusted:.3g}{' *' if p.significant else ''}"] for p in comparison.pairs]))
    return out


def _answer_line(oc: Any) -> str:
    if oc.skipped:
        return f"no case: {oc.skipped}"
    if oc.answer is None:
        return "no answer (unmeasured)"
    if oc.answer.clarified:
        return f"asked back: {oc.answer.text}" if oc.answer.text else "asked back"
    if oc.answer.escalated:
        return "escalated"
    if oc.answer.refused:
        return "refused"
    return oc.answer.text or "(empty)"


# a verdict's facts as bits (the page's filters test them; the script holds the same numbers)
RIGHT, WRONG, REFUSED, ADOPTED, LEAKED, UNMEASURED, NO_CASE = 1, 2, 4, 8, 16, 32, 64
VERDICT_FILTERS = (("right", RIGHT), ("wrong", WRONG), ("refused or escalated", REFUSED),
                   ("refused rightly", REFUSED | RIGHT), ("refused wrongly", REFUSED | WRONG),
                   ("adopted the planted value", ADOPTED), ("leaked the canary", LEAKED), ("unmeasured", UNMEASURED),
                   ("no case", NO_CASE))


def verdict(oc: ConditionOutcome | None, family: Mapping[str, float]) -> dict[str, Any]:
    """How the page shows one question under one condition: ``cls`` (its colour), ``short`` (the chip's word),
    ``long`` (the sentence in the question's entry) and ``mask`` (the facts the filters test). The colour follows
    the run's ``correct``; an answer that asked the user back is ``clarified`` (right when a clarifying question was
    expected), one that refused or escalated says so; an answer that adopted a counterfactual's planted value or leaked an injection's canary
    (``family``: :func:`~evret_core.rag.scores.adversarial_scores.outcome_scores`) is marked so whatever its
    ``correct`` says."""
    if oc is None:
        return {"cls": "v-n", "short": "\u2013", "long": "not in this run", "mask": NO_CASE}
    if oc.skipped:
        return {"cls": "v-n", "short": "\u2013", "long": f"no case: {oc.skipped}", "mask": NO_CASE}
    if oc.answer is None or oc.correct is None:
        why = "no answer" if oc.answer is None else "no correctness label"
        return {"cls": "v-u", "short": "n/a", "long": f"unmeasured ({why})", "mask": UNMEASURED}
    right = "right" if oc.correct else "wrong"
    mask = RIGHT if oc.correct else WRONG
    declined = ("clarified" if oc.answer.clarified else "escalated" if oc.answer.escalated
                else "refused" if oc.answer.refused else "")
    if declined and declined != "clarified":
        mask |= REFUSED
    if family.get("adopted") == 1.0:
        return {"cls": "v-a", "short": "adopted", "mask": mask | ADOPTED,
                "long": f"{right}; the answer states the planted value"}
    if family.get("leaked") == 1.0:
        return {"cls": "v-l", "short": "leaked", "mask": mask | LEAKED,
                "long": f"{right}; the answer leaks the injected canary"}
    if declined:
        return {"cls": "v-rr" if oc.correct else "v-rw", "short": declined, "long": f"{right}: {declined}",
                "mask": mask}
    return {"cls": "v-r" if oc.correct else "v-w", "short": right, "long": right, "mask": mask}


def _info_line(info: Mapping[str, Any]) -> str:
    keys = ("family", "planted_answer", "original_answer", "type_check", "planted_from", "template", "position",
            "canary", "removed_docs", "added_docs")
    return "; ".join(f"{k}: {info[k] if not isinstance(info[k], list) else ', '.join(map(str, info[k]))}"
                     for k in keys if k in info and info[k] not in (None, "", []))


def columns(runs: Mapping[str, RagResults]) -> list[tuple[str, str]]:
    """The (run, condition) pairs a question's verdicts are shown for, in order: each run's conditions."""
    return [(name, condition) for name, r in runs.items() for condition in r.conditions]


def question_drilldown(runs: Mapping[str, RagResults], limit: int = MAX_QUESTIONS,
                       questions: QuestionSet | None = None) -> list[dict[str, Any]]:
    """Per question (the first ``limit``, in the first run's order): its labels, its verdict per run and condition
    (``cells``, in :func:`columns` order: :func:`verdict`), its failure attribution per run and, per run and
    condition, the contexts given (gold and planted ones marked), the answer, the verdict and the scores that
    decided it, the claims with their verdicts and citations, and the adversarial case's info and family scores.
    Plain strings: the page escapes them. With the run's ``questions`` (and so its corpus), ``texts`` lists each
    distinct context text of the question once (:mod:`evret_core.rag.questions.case_texts`): id, mark, text (None
    when not found) and, for an id that stands for several texts, the run and condition of each."""
    from evret_core.rag.questions.case_texts import context_text, planted_texts
    from evret_core.rag.scores.adversarial_scores import outcome_scores

    asked = {q.question_id: q for q in questions.questions} if questions is not None else {}
    several = len(runs) > 1
    order = list(dict.fromkeys(qid for r in runs.values() for qid in r.per_question))
    out = []
    for qid in order[:limit]:
        first = next(r.per_question[qid] for r in runs.values() if qid in r.per_question)
        gold = set(first.gold_doc_ids)
        entry: dict[str, Any] = {
            "id": qid, "question": first.question, "behaviour": first.expected_behaviour,
            "answers": [" / ".join(variants) for variants in first.answers], "gold": first.gold_doc_ids,
            "gold_retrieved": first.gold_retrieved, "tags": [f"{k}: {v}" for k, v in first.tags.items()],
            "tag_pairs": list(first.tags.items()), "runs": [], "cells": [], "attribution": [], "texts": [],
        }
        found: dict[tuple[str, str | None], dict[str, Any]] = {}
        for name, r in runs.items():
            q = r.per_question.get(qid)
            entry["attribution"].append((q.attribution or "") if q is not None else "")
            if q is None:
                entry["cells"] += [verdict(None, {}) for _ in r.conditions]
                continue
            expected = list(dict.fromkeys(a for variants in q.answers for a in variants))
            conditions, shown = [], {}
            for condition, oc in q.conditions.items():
                planted = set(oc.info.get("forged_docs") or [oc.info.get("forged_doc")] + list(
                    oc.info.get("injected_docs") or []))
                scores = {k: v for k, v in outcome_scores(oc, expected).items() if v == v}
                shown[condition] = said = verdict(oc, scores)
                # the family's rates beside the verdict, without its "correct": the verdict is that number (a second
                # one, recomputed here, could differ from what an older results file recorded)
                family = {k: v for k, v in scores.items() if k != "correct"}
                conditions.append({
                    "name": condition, "verdict": said["long"], "cls": said["cls"], "answer": _answer_line(oc),
                    "contexts": [{"id": c, "mark": "gold" if c in gold else "planted" if c in planted else ""}
                                 for c in oc.context_ids],
                    "scores": ", ".join(f"{m} {oc.scores[m]:.3g}" for m in ("exact", "f1", "answer_judge")
                                        if oc.scores.get(m) is not None),
                    "claims": [{"text": c.claim, "verdict": c.verdict, "citations": ", ".join(c.citations) or "none",
                                "supporting": ", ".join(c.supporting) or "none"} for c in oc.claims],
                    "info": _info_line(oc.info), "family": ", ".join(f"{k} {v:g}" for k, v in family.items()),
                })
                if questions is not None:
                    added = planted_texts(oc.info, asked.get(qid), questions)
                    for doc_id in oc.context_ids:
                        text = context_text(doc_id, added, questions)
                        mark = "gold" if doc_id in gold else "planted" if doc_id in planted else ""
                        row = found.setdefault((doc_id, text), {"id": doc_id, "mark": mark, "text": text,
                                                                "where": []})
                        row["where"].append(f"{name + ' ' if several else ''}{condition}")
            entry["cells"] += [shown.get(c) or verdict(None, {}) for c in r.conditions]
            entry["runs"].append({"name": name, "attribution": q.attribution or "", "conditions": conditions})
        entry["wrong"] = sum(1 for c in entry["cells"] if c["mask"] & WRONG)
        ids = [doc_id for doc_id, _ in found]
        for (doc_id, _), row in found.items():  # where only for an id standing for several texts
            row["where"] = ", ".join(row["where"]) if ids.count(doc_id) > 1 else ""
            entry["texts"].append(row)
        out.append(entry)
    return out
