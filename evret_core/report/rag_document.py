"""The RAG report as a document of titled tables, and the per-question drill-down of its HTML page.

:func:`rag_sections` computes what the report says once (retrieval, generation per condition, failure
attribution, condition differences, slices, adversarial rates, the comparison of runs) and
:func:`question_drilldown` what the page shows per question; the report's renderers lay them out, the same ones as
retrieval reports' (:func:`evret_core.report.render_report` with a :class:`~evret_core.report.common.RagReportData`:
:mod:`evret_core.report.markdown`, :mod:`evret_core.report.html`). Every text from a results file (run names, tags,
tag values, condition names) is escaped by the renderer: pipes and brackets in Markdown cells, HTML autoescaping
in the page.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evret_core.rag.questions.question_sets import QuestionSet
from evret_core.results.rag_results import ATTRIBUTIONS, RagResults
from evret_core.statistics.inference import Comparison, format_interval

__all__ = ["Section", "question_drilldown", "rag_sections"]

MAX_QUESTIONS = 1000  # questions in the HTML drill-down; the results file holds them all
PREVIEW_CHARS = 160  # of each context text, in the question's list (the whole text is at the page's end)

GENERATION = ("exact", "f1", "correct", "refused", "wrong_refusal_rate", "correct_refusal_rate", "groundedness",
              "faithfulness", "citation_precision", "citation_recall", "answer_relevance")
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


def _run_sections(name: str, r: RagResults) -> list[Section]:
    level = f"{r.confidence_level:.0%} CI"
    out = [Section(2, name, f"{len(r.per_question)} questions; conditions: {', '.join(r.conditions)}.")]
    if r.retrieval:
        out.append(Section(3, f"Retrieval (retrieved condition, {level})", header=["metric", "value"],
                           rows=[[m, cell(v, r.retrieval_intervals.get(m))] for m, v in r.retrieval.items()]))
    rows = [[metric] + [cell(r.generation.get(c, {}).get(metric), r.generation_intervals.get(c, {}).get(metric))
                        for c in r.conditions]
            for metric in GENERATION if any(metric in r.generation.get(c, {}) for c in r.conditions)]
    out.append(Section(3, f"Generation ({level})", header=["metric", *r.conditions], rows=rows))
    if r.attribution:
        total = sum(r.attribution.values()) or 1
        out.append(Section(3, "Failure attribution", header=["outcome", "questions", "share"],
                           rows=[[label, str(r.attribution.get(label, 0)), f"{r.attribution.get(label, 0) / total:.1%}"]
                                 for label in ATTRIBUTIONS]))
    if r.differences:
        out.append(Section(3, "Differences between conditions (paired bootstrap)", header=["b - a", "metric", "mean", "n"],
                           rows=[[f"{d.b} - {d.a}", d.metric, cell(d.mean, d.interval), str(d.n)]
                                 for d in r.differences]))
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
    if oc.answer.escalated:
        return "escalated"
    if oc.answer.refused:
        return "refused"
    return oc.answer.text or "(empty)"


def _verdict_mark(correct: bool | None) -> str:
    return "n/a" if correct is None else "right" if correct else "wrong"


def _info_line(info: Mapping[str, Any]) -> str:
    keys = ("family", "planted_answer", "original_answer", "type_check", "planted_from", "template", "position",
            "canary", "removed_docs", "added_docs")
    return "; ".join(f"{k}: {info[k] if not isinstance(info[k], list) else ', '.join(map(str, info[k]))}"
                     for k in keys if k in info and info[k] not in (None, "", []))


def question_drilldown(runs: Mapping[str, RagResults], limit: int = MAX_QUESTIONS,
                       questions: QuestionSet | None = None) -> list[dict[str, Any]]:
    """Per question (the first ``limit``, in the first run's order): its labels and, per run and condition, the
    contexts given (gold and planted ones marked), the answer, the scores that decided ``correct``, the claims with
    their verdicts and citations, the adversarial case's info, and the failure attribution. Plain strings: the
    page escapes them. With the run's ``questions`` (and so its corpus), ``texts`` lists each distinct context
    text of the question once (:mod:`evret_core.rag.questions.case_texts`): id, mark, text (None when not found) and, for an
    id that stands for several texts, the run and condition of each."""
    from evret_core.rag.questions.case_texts import context_text, planted_texts
    from evret_core.rag.scores.adversarial_scores import outcome_scores

    asked = {q.question_id: q for q in questions.questions} if questions is not None else {}

    order: list[str] = []
    for r in runs.values():
        order += [qid for qid in r.per_question if qid not in order]
    out = []
    for qid in order[:limit]:
        first = next(r.per_question[qid] for r in runs.values() if qid in r.per_question)
        gold = set(first.gold_doc_ids)
        entry: dict[str, Any] = {
            "id": qid, "question": first.question, "behaviour": first.expected_behaviour,
            "answers": [" / ".join(variants) for variants in first.answers], "gold": first.gold_doc_ids,
            "tags": [f"{k}: {v}" for k, v in first.tags.items()], "runs": [], "marks": [], "texts": [],
        }
        found: dict[tuple[str, str | None], dict[str, Any]] = {}
        for name, r in runs.items():
            q = r.per_question.get(qid)
            if q is None:
                continue
            conditions = []
            for condition, oc in q.conditions.items():
                planted = set(oc.info.get("forged_docs") or [oc.info.get("forged_doc")] + list(
                    oc.info.get("injected_docs") or []))
                expected = list(dict.fromkeys(a for variants in q.answers for a in variants))
                # the family's rates beside the verdict, without its "correct": the verdict is that number (a second
                # one, recomputed here, could differ from what an older results file recorded)
                family = {k: f"{v:g}" for k, v in outcome_scores(oc, expected).items() if v == v and k != "correct"}
                conditions.append({
                    "name": condition, "verdict": _verdict_mark(oc.correct), "answer": _answer_line(oc),
                    "contexts": [{"id": c, "mark": "gold" if c in gold else "planted" if c in planted else ""}
                                 for c in oc.context_ids],
                    "scores": ", ".join(f"{m} {oc.scores[m]:.3g}" for m in ("exact", "f1", "answer_judge")
                                        if oc.scores.get(m) is not None),
                    "claims": [{"text": c.claim, "verdict": c.verdict, "citations": ", ".join(c.citations) or "none",
                                "supporting": ", ".join(c.supporting) or "none"} for c in oc.claims],
                    "info": _info_line(oc.info), "family": ", ".join(f"{k} {v}" for k, v in family.items()),
                })
                entry["marks"].append(f"{name + ' ' if len(runs) > 1 else ''}{condition} {_verdict_mark(oc.correct)}")
                if questions is not None:
                    added = planted_texts(oc.info, asked.get(qid), questions)
                    for doc_id in oc.context_ids:
                        text = context_text(doc_id, added, questions)
                        mark = "gold" if doc_id in gold else "planted" if doc_id in planted else ""
                        row = found.setdefault((doc_id, text), {"id": doc_id, "mark": mark, "text": text,
                                                                "where": []})
                        row["where"].append(f"{name + ' ' if len(runs) > 1 else ''}{condition}")
            entry["runs"].append({"name": name, "attribution": q.attribution or "", "conditions": conditions})
        ids = [doc_id for doc_id, _ in found]
        for (doc_id, _), row in found.items():  # where only for an id standing for several texts
            row["where"] = ", ".join(row["where"]) if ids.count(doc_id) > 1 else ""
            entry["texts"].append(row)
        out.append(entry)
    return out
