"""Plain-text tables of a RAG run for the terminal."""

from __future__ import annotations

import sys
from typing import Any, TextIO

from evret_core.rag.results import ATTRIBUTIONS, RagResults
from evret_core.stats import format_interval

HEADLINE = ("exact", "f1", "has_ans_exact", "has_ans_f1", "no_ans_exact", "no_ans_f1", "correct", "refused",
            "wrong_refusal_rate", "correct_refusal_rate", "groundedness", "faithfulness", "citation_precision",
            "citation_recall", "contradiction_rate", "answer_relevance", "answer_judge")


def print_rag(results: RagResults, title: str | None = None, file: TextIO | None = None) -> None:
    """Retrieval, generation per condition, attribution, condition differences and what was unmeasured."""
    out = file or sys.stdout
    if title:
        print(title, file=out)
    level = f"{results.confidence_level:.0%} CI"
    # only questions to refuse or escalate may lack gold ids and answers (a question set refuses any other): they
    # have nothing to retrieve, so leaving them out of retrieval is by design, said in the header, not a warning
    unlabelled = results.unmeasured.get("retrieval_unlabelled") or []
    if results.retrieval:
        scored = len(results.per_question) - len(unlabelled)
        over = (f"; {scored} of {len(results.per_question)} questions, the {len(unlabelled)} to refuse or escalate "
                f"have no gold" if unlabelled else "")
        print(f"\nretrieval (retrieved condition; {level}{over})", file=out)
        for metric, mean in results.retrieval.items():
            print(f"  {metric:<22} {format_interval(mean, results.retrieval_intervals.get(metric))}", file=out)
    print(f"\ngeneration ({level}; n = questions measured)", file=out)
    for condition in results.conditions:
        print(f"  [{condition}]", file=out)
        means = results.generation.get(condition, {})
        for metric in HEADLINE:
            if metric not in means:
                continue
            value = means[metric]
            n = results.generation_n.get(condition, {}).get(metric, 0)
            text = "n/a" if value is None else format_interval(
                value, results.generation_intervals.get(condition, {}).get(metric))
            print(f"  {metric:<22} {text}  (n={n})", file=out)
    if results.attribution:
        total = sum(results.attribution.values()) or 1
        print("\nattribution (gold vs retrieved context)", file=out)
        for label in ATTRIBUTIONS:
            count = results.attribution.get(label, 0)
            print(f"  {label:<22} {count:>5}  {count / total:6.1%}", file=out)
    if results.differences:
        print(f"\ndifferences between conditions (paired bootstrap, {level})", file=out)
        for d in results.differences:
            print(f"  {d.b} - {d.a} {d.metric:<8} {format_interval(d.mean, d.interval)}  (n={d.n})", file=out)
    if results.adversarial:
        print_adversarial(results.adversarial, level, out)
    for line in unmeasured_lines(results.unmeasured):
        print(f"WARNING: {line}", file=out)


def print_adversarial(summary: dict[str, Any], level: str, out: TextIO) -> None:
    """Each adversarial condition's rates, its drop against the clean condition, and its weakest slices."""
    print(f"\nadversarial conditions ({level})", file=out)
    for condition, entry in summary.items():
        print(f"  [{condition}] n={entry.get('n', 0)}, skipped={entry.get('skipped', 0)}", file=out)
        for rate, value in entry.get("rates", {}).items():
            print(f"  {rate:<22} {format_interval(value, entry['intervals'].get(rate))}", file=out)
        if "clean_wrong_refusal_rate" in entry:
            print(f"  {'clean wrong refusals':<22} {entry['clean_wrong_refusal_rate']:.3f}  "
                  f"(refusing everything must not look good)", file=out)
        drop = entry.get("drop") or {}
        if drop.get("n"):
            print(f"  {'correct vs ' + str(entry['clean']):<22} {format_interval(drop['delta'], drop['interval'])}"
                  f"  ({drop['clean']:.3f} -> {drop['adversarial']:.3f}, n={drop['n']})", file=out)
        worst = sorted(((key, value, s["drop"]) for key, values in entry.get("slices", {}).items()
                        for value, s in values.items() if (s.get("drop") or {}).get("n", 0) >= 5),
                       key=lambda item: item[2]["delta"])[:3]
        for key, value, d in worst:
            print(f"    weakest slice {key}={value}: {format_interval(d['delta'], d['interval'])} (n={d['n']})",
                  file=out)


def unmeasured_lines(unmeasured: dict[str, Any]) -> list[str]:
    lines = []
    for condition, ids in (unmeasured.get("answers") or {}).items():
        lines.append(f"{len(ids)} answer(s) missing under {condition} (e.g. {ids[0]}); left out of the means")
    for condition, ids in (unmeasured.get("skipped") or {}).items():
        lines.append(f"{len(ids)} question(s) have no case under {condition} (e.g. {ids[0]}; the reason is in "
                     f"its per-question 'skipped'); not generated, left out of the means")
    for condition, n in (unmeasured.get("claims") or {}).items():
        lines.append(f"{n} claim judgment(s) unmeasured under {condition}")
    if unmeasured.get("correctness_unlabelled"):
        lines.append(f"{len(unmeasured['correctness_unlabelled'])} question(s) expected to be answered have no "
                     f"expected answers: no exact match, F1 or correctness for them")
    if unmeasured.get("retrieval_judgments"):
        lines.append(f"{unmeasured['retrieval_judgments']} retrieval judgment(s) unmeasured")
    return lines


def print_plan(plan: dict[str, Any], file: TextIO | None = None) -> None:
    out = file or sys.stdout
    print(f"dry run: {plan['questions']} question(s) x {len(plan['conditions'])} condition(s) "
          f"({', '.join(plan['conditions'])}): {plan['generator_calls']} generator call(s) over "
          f"{plan['contexts']} context(s)", file=out)
    for part in ("generator", "claim_judge", "relevance", "llm_total"):
        section = plan.get(part) or {}
        if section:
            print(f"  {part}:", file=out)
        for key, value in section.items():
            print(f"    {key}: {value}", file=out)
    if plan.get("note"):
        print(plan["note"], file=out)
