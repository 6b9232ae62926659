"""Plain-text tables of a RAG run for the terminal, each laid out by ``terminal.text_table`` (the one layout the
retrieval summaries use too); ``sep`` is its column separator."""

from __future__ import annotations

import sys
from typing import Any, TextIO

from evret_core.contracts.errors import visible
from evret_core.report.terminal import format_p, print_table
from evret_core.results.rag_results import RagResults, attribution_labels
from evret_core.statistics.inference import format_interval

HEADLINE = ("exact", "f1", "has_ans_exact", "has_ans_f1", "no_ans_exact", "no_ans_f1", "correct", "refused",
            "wrong_refusal_rate", "correct_refusal_rate", "clarify_rate", "wrong_clarify_rate", "groundedness",
            "faithfulness", "citation_precision", "citation_recall", "contradiction_rate", "history_support_rate",
            "answer_relevance", "answer_judge")


def print_rag(results: RagResults, title: str | None = None, file: TextIO | None = None,
              all_pairs: bool = False, sep: str = " ", warnings: TextIO | None = None) -> None:
    """Retrieval, generation per condition, attribution, condition differences and what was unmeasured (the
    ``WARNING`` lines go to ``warnings``, default ``file``: ``evret rag`` sends them to standard error).

    With more than two conditions (an adversarial run) the default is compact: one table of means (conditions as
    columns), each condition's difference against the clean one (``retrieved``, else ``gold``), and one row per
    adversarial family. ``all_pairs`` prints every condition's intervals, every pairwise difference and the
    families' weakest slices instead (the results JSON holds all of them either way). ``sep`` is the column
    separator handed to ``text_table``."""
    out = file or sys.stdout
    if title:
        print(visible(title), file=out)
    level = f"{results.confidence_level:.0%} CI"
    # only questions to refuse, escalate or clarify may lack gold ids and answers (a question set refuses any other):
    # they have nothing to retrieve, so leaving them out of retrieval is by design, said in the header, not a warning
    unlabelled = results.unmeasured.get("retrieval_unlabelled") or []
    if results.retrieval:
        scored = len(results.per_question) - len(unlabelled)
        over = (f"; {scored} of {len(results.per_question)} questions, the {len(unlabelled)} to "
                f"{unlabelled_behaviours(results, unlabelled)} have no gold" if unlabelled else "")
        print(f"\nretrieval (retrieved condition; {level}{over})", file=out)
        print_table([[metric, format_interval(mean, results.retrieval_intervals.get(metric))]
                     for metric, mean in results.retrieval.items()], file=out, **_listing(sep))
    compact = not all_pairs and len(results.conditions) > 2
    if compact:
        _generation_table(results, out, sep)
    else:
        _generation_listing(results, level, out, sep)
    clean = clean_condition(results.conditions)
    if results.attribution:
        total = sum(results.attribution.values()) or 1
        print("\nattribution (gold vs retrieved context)", file=out)
        counts = {label: results.attribution.get(label, 0) for label in attribution_labels(results)}
        print_table([[label, str(n), f"{n / total:.1%}"] for label, n in counts.items()], file=out, align="<>>",
                    **_listing(sep, [22, 5, 7]))
    if results.attribution_by_turn_index:
        print("\nattribution by turn index (turns of each index)", file=out)
        labels = turn_index_labels(results)
        print_table(turn_index_rows(results, labels), ["turn", *labels], file=out, align="<" + ">" * len(labels),
                    **_listing(sep, [6, *[len(label) for label in labels]]))
    pairs = carried_pairs(results)
    if pairs:
        print(f"\ncarried failures (earlier wrong turn -> the turn it carried into; {len(pairs)})", file=out)
        for earlier, later in pairs[:10]:
            print(f"  {visible(earlier)} -> {visible(later)}", file=out)
        if len(pairs) > 10:
            print(f"  ... {len(pairs) - 10} more in the results file (per_question[...].carried_from)", file=out)
    if compact and clean is not None:
        _differences_table(results, clean, level, out, sep)
    elif results.differences:
        unit = "conversation-clustered bootstrap" if results.clustered else "paired bootstrap"
        print(f"\ndifferences between conditions ({unit}, {level})", file=out)
        pair = max(len(f"{d.b} - {d.a}") for d in results.differences) + 9  # the metric name padded to 8
        print_table([[f"{d.b} - {d.a} {d.metric}", f"{format_interval(d.mean, d.interval)}  (n={d.n})"
                      + ("" if d.p_value is None else f"  p={format_p(d.p_value)}")]
                     for d in results.differences], file=out, **_listing(sep, [pair]))
    if results.adversarial:
        if compact:
            adversarial_table(results.adversarial, level, out, sep)
        else:
            print_adversarial(results.adversarial, level, out, sep)
    for line in notes(results):
        print(f"note: {visible(line)}", file=out)
    for line in unmeasured_lines(results.unmeasured):
        print(f"WARNING: {visible(line)}", file=warnings or out)
    if results.stats.get("dropped_citations"):
        print(f"note: {results.stats['dropped_citations']} citation(s) of ids that were not among the question's "
              f"contexts were dropped (per answer: metadata['dropped_citations'])", file=out)


def clean_condition(conditions: list[str]) -> str | None:
    """The condition others are compared with: ``retrieved`` when the run has it, else ``gold``."""
    return next((c for c in ("retrieved", "gold") if c in conditions), None)


def unlabelled_behaviours(results: RagResults, unlabelled: list[str]) -> str:
    """What the questions without gold are expected to do, for the retrieval header: refuse or escalate, and
    clarify when one of them is to clarify."""
    asked = any((q := results.per_question.get(qid)) is not None and q.expected_behaviour == "clarify"
                for qid in unlabelled)
    return "refuse, escalate or clarify" if asked else "refuse or escalate"


def carried_pairs(results: RagResults) -> list[tuple[str, str]]:
    """Each ``carried_failure`` turn as (the earlier wrong turn it carried from, the turn), in question order."""
    return [(q.carried_from, qid) for qid, q in results.per_question.items() if q.carried_from is not None]


def turn_index_labels(results: RagResults) -> list[str]:
    """The attribution labels that some turn index counts, in order (the columns of the by-turn-index table)."""
    return [label for label in attribution_labels(results)
            if any(row.get(label) for row in results.attribution_by_turn_index.values())]


def turn_index_rows(results: RagResults, labels: list[str]) -> list[list[str]]:
    """One row per turn index: the index and the count of each of ``labels`` among the turns with it."""
    return [[index, *(str(row.get(label, 0)) for label in labels)]
            for index, row in results.attribution_by_turn_index.items()]


def conversation_note(results: RagResults) -> str | None:
    """For a run over conversation turns: what the questions are, how the turns were retrieved and judged, and
    that intervals and tests resample whole conversations, with each difference's clustered p-value."""
    if not results.clustered:
        return None
    conversations = len({q.conversation_id for q in results.per_question.values()})
    setup = results.config.get("conversation") or {}
    line = (f"the questions are {len(results.per_question)} turns of {conversations} conversations (query form "
            f"{setup.get('query_form', '?')}, {setup.get('history', '?')} history, claims history "
            f"{setup.get('claims_history', '?')}); intervals resample whole conversations")
    tested = [d for d in results.differences if d.p_value is not None]
    if tested:
        line += ("; conversation-clustered paired randomization tests: "
                 + ", ".join(f"{d.b} - {d.a} {d.metric} p={format_p(d.p_value)}" for d in tested
                             if d.p_value is not None))
    return line


def notes(results: RagResults) -> list[str]:
    """What a reader needs to read the scores right (which judge decided ``correct``, scores that are fixed by
    construction, the conversations behind the turns), from the run's config."""
    lines = [f"'correct' decided by: {correct_rule(results.config)}"] if results.config else []
    conversation = conversation_note(results)
    if conversation is not None:
        lines.append(conversation)
    generator = results.config.get("generator")
    if isinstance(generator, dict) and generator.get("name") == "extractive" and generator.get("answer") != "paraphrase":
        lines.append("groundedness, faithfulness and citation precision are 1.000 by construction for the extractive "
                     "generator (its one claim is a sentence copied from the context it cites); "
                     "--generator-option answer=paraphrase is an offline baseline whose claims can fail them")
    return lines


def correct_rule(config: dict[str, Any]) -> str:
    """How the run decided ``correct`` for a question expected to be answered, in words (a results file written
    before ``config["correct_rule"]`` was recorded used exact match or F1 alone)."""
    judge = config.get("answer_judge")
    name = judge.get("name", judge) if isinstance(judge, dict) else judge
    recorded = config.get("correct_rule")
    short = recorded.get("short_answer_extra_words") if isinstance(recorded, dict) else None
    if not isinstance(short, int) or isinstance(short, bool):
        rule = f"exact match or token F1 > {config.get('correct_f1', 0.5):g}"
        if judge:
            return f"{rule}, or the answer judge {name!r} (--answer-judge) accepting the answer"
        return (f"{rule} (no answer judge: a verbose answer that holds the gold answer counts as wrong; "
                f"add --answer-judge contains to accept it)")
    rule = (f"exact match, token F1 > {config.get('correct_f1', 0.5):g}, or a short answer stating a gold answer "
            f"whole (at most {short} other words beside the question's); never with a number that disagrees with "
            f"the gold answer or an alternative offered ('or')")
    if judge:
        return f"{rule}; or the answer judge {name!r} (--answer-judge) accepting the answer"
    return f"{rule} (a longer answer that holds the gold answer needs --answer-judge, e.g. contains)"


def _listing(sep: str, widths: list[int] | None = None) -> dict[str, Any]:
    """The layout of a RAG listing: indented two spaces, a name column at least 22 wide."""
    return {"indent": "  ", "sep": sep, "widths": widths or [22]}


def generation_rows(results: RagResults) -> list[str]:
    """The generation scores every report lists, in order: the headline metrics, then the scores of plugins' RAG
    scores (names the built-ins do not give)."""
    from evret_core.rag.scores.summary import DERIVED_METRICS, GENERATION_METRICS

    known = {*HEADLINE, *GENERATION_METRICS, *DERIVED_METRICS}
    extra = [m for c in results.conditions for m in results.generation.get(c, {}) if m not in known]
    return [*HEADLINE, *dict.fromkeys(extra)]


def _generation_listing(results: RagResults, level: str, out: TextIO, sep: str) -> None:
    print(f"\ngeneration ({level}; n = questions measured)", file=out)
    for condition in results.conditions:
        print(f"  [{visible(condition)}]", file=out)
        means = results.generation.get(condition, {})
        rows = []
        for metric in (m for m in generation_rows(results) if m in means):
            value = means[metric]
            n = results.generation_n.get(condition, {}).get(metric, 0)
            text = "n/a" if value is None else format_interval(
                value, results.generation_intervals.get(condition, {}).get(metric))
            rows.append([metric, f"{text}  (n={n})"])
        print_table(rows, file=out, **_listing(sep))


def _generation_table(results: RagResults, out: TextIO, sep: str) -> None:
    """Means per metric, a column per condition (right-aligned, one separator narrower than the wider of 9 and
    the condition's name + 1)."""
    conditions = results.conditions
    width = max(9, *(len(c) + 1 for c in conditions)) - len(sep)
    print("\ngeneration (means; intervals and n: --all-pairs or the results JSON)", file=out)
    rows = []
    for metric in generation_rows(results):
        if not any(metric in results.generation.get(c, {}) for c in conditions):
            continue
        values = [results.generation.get(c, {}).get(metric) for c in conditions]
        rows.append([metric, *("n/a" if value is None else f"{value:.3f}" for value in values)])
    rows.append(["n (correct)", *(str(results.generation_n.get(c, {}).get("correct", 0)) for c in conditions)])
    print_table(rows, ["metric", *conditions], file=out, align="<" + ">" * len(conditions),
                **_listing(sep, [22, *[width] * len(conditions)]))


def _differences_table(results: RagResults, clean: str, level: str, out: TextIO, sep: str) -> None:
    """Each condition minus ``clean``, one row per condition, a column per metric (mean [interval])."""
    rows: dict[str, dict[str, str]] = {}
    for d in results.differences:
        if clean not in (d.a, d.b):
            continue
        if d.a == clean:
            other, mean, low, high = d.b, d.mean, d.interval[0], d.interval[1]
        else:
            other, mean, low, high = d.a, -d.mean, -d.interval[1], -d.interval[0]
        rows.setdefault(other, {})[d.metric] = format_interval(mean + 0.0, [low + 0.0, high + 0.0])  # no "-0.000"
    if not rows:
        return
    metrics = list(dict.fromkeys(m for cells in rows.values() for m in cells))
    width = max(len(c) for c in rows) + 2 - len(sep)
    unit = "conversation-clustered bootstrap" if results.clustered else "paired bootstrap"
    print(f"\ndifferences against {visible(clean)} (condition - {visible(clean)}; {unit}, {level}; every "
          f"pair: --all-pairs)", file=out)
    print_table([[other, *(cells.get(m, "n/a") for m in metrics)] for other, cells in rows.items()],
                ["condition", *metrics], file=out, **_listing(sep, [width, *[26 - len(sep)] * len(metrics)]))


def adversarial_table(summary: dict[str, Any], level: str, out: TextIO, sep: str = " ") -> None:
    """One row per adversarial condition: n, skipped and its family's rates (with the clean condition's wrong
    refusals beside a refusal rate, so refusing everything cannot look good)."""
    print("\nadversarial conditions (rates; intervals and weakest slices: --all-pairs)", file=out)
    rows = []
    for condition, entry in summary.items():
        rates = ", ".join(f"{rate} {value:.3f}" for rate, value in entry.get("rates", {}).items())
        refusals = (f"; clean wrong refusals {entry['clean_wrong_refusal_rate']:.3f}"
                    if "clean_wrong_refusal_rate" in entry and "refused" in entry.get("rates", {}) else "")
        rows.append([condition, f"n={entry.get('n', 0)} skipped={entry.get('skipped', 0)}: {rates}{refusals}"])
    print_table(rows, file=out, **_listing(sep, [16]))


def print_adversarial(summary: dict[str, Any], level: str, out: TextIO, sep: str = " ") -> None:
    """Each adversarial condition's rates, its drop against the clean condition, and its weakest slices."""
    print(f"\nadversarial conditions ({level})", file=out)
    for condition, entry in summary.items():
        print(visible(f"  [{condition}] n={entry.get('n', 0)}, skipped={entry.get('skipped', 0)}"), file=out)
        rows = [[rate, format_interval(value, entry["intervals"].get(rate))]
                for rate, value in entry.get("rates", {}).items()]
        if "clean_wrong_refusal_rate" in entry:
            rows.append(["clean wrong refusals",
                         f"{entry['clean_wrong_refusal_rate']:.3f}  (refusing everything must not look good)"])
        drop = entry.get("drop") or {}
        if drop.get("n"):
            rows.append([f"correct vs {entry['clean']}", f"{format_interval(drop['delta'], drop['interval'])}  "
                         f"({drop['clean']:.3f} -> {drop['adversarial']:.3f}, n={drop['n']})"])
        print_table(rows, file=out, **_listing(sep))
        worst = sorted(((key, value, s["drop"]) for key, values in entry.get("slices", {}).items()
                        for value, s in values.items() if (s.get("drop") or {}).get("n", 0) >= 5),
                       key=lambda item: item[2]["delta"])[:3]
        for key, value, d in worst:
            print(visible(f"    weakest slice {key}={value}: {format_interval(d['delta'], d['interval'])} "
                          f"(n={d['n']})"), file=out)


def unmeasured_lines(unmeasured: dict[str, Any]) -> list[str]:
    lines = []
    for condition, ids in (unmeasured.get("answers") or {}).items():
        lines.append(f"{len(ids)} answer(s) missing under {condition} (e.g. {ids[0]}); left out of the means")
    for condition, ids in (unmeasured.get("skipped") or {}).items():
        lines.append(f"{len(ids)} question(s) have no case under {condition} (e.g. {ids[0]}; the reason is in "
                     f"its per-question 'skipped'); not generated, left out of the means")
    for condition, ids in (unmeasured.get("relevance") or {}).items():
        lines.append(f"{len(ids)} answer relevance grade(s) unmeasured under {condition} (e.g. {ids[0]}; the scorer "
                     f"failed, see stats.llm.relevance); left out of answer_relevance")
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
    print(visible(f"dry run: {plan['questions']} question(s) x {len(plan['conditions'])} condition(s) "
                  f"({', '.join(plan['conditions'])}): {plan['generator_calls']} generator call(s) over "
                  f"{plan['contexts']} context(s)"), file=out)
    if "reanswers_at_most" in plan:
        print(f"  --history generated: at most {plan['reanswers_at_most']} more generator call(s) "
              f"({plan['generator_calls_at_most']} in all), the turns wrong under retrieved after an earlier wrong "
              f"turn answered again with the reference history (carried_failure); each turn is planned with the "
              f"reference history, its own earlier answers being unknown before the run", file=out)
    for part in ("generator", "claim_judge", "relevance", "llm_total"):
        section = plan.get(part) or {}
        if section:
            print(f"  {part}:", file=out)
        for key, value in section.items():
            print(visible(f"    {key}: {value}"), file=out)
    if plan.get("note"):
        print(visible(str(plan["note"])), file=out)
