"""One number per quantity (issue 33, newcomer item 4): every score `evret rag` prints for an adversarial run of the
bundled example equals the results JSON's, the JSON holds each quantity once (the families' `correct` and `refused`
are the generation means, their drop is the paired difference), and the HTML report embeds the same values.

Before the fix an answer stating the planted value ("2 euros per item" for "5 euros per item") was `correct` in the
generation table and the differences but not in the family's rates: 0.429 / 0.000 / 0.286 and a JSON drop of -0.143
for one quantity."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from evret_core.cli import main
from evret_core.rag import RagResults
from evret_core.statistics.inference import format_interval

from .conftest import EXAMPLE

FAMILIES = "counterfactual,injection,missing-gold,irrelevant-only"
CELL = r"-?\d+\.\d{3} \[-?\d+\.\d{3}, -?\d+\.\d{3}\]"


def shown(value: float, interval: list[float] | None = None) -> str:
    """A number as the terminal prints it (no "-0.000")."""
    return format_interval(value + 0.0, None if interval is None else [interval[0] + 0.0, interval[1] + 0.0])


def oriented(results: RagResults, clean: str, other: str, metric: str) -> tuple[float, list[float], int]:
    """``other - clean`` of ``metric`` from the JSON's differences (stored as ``b - a`` for every pair)."""
    d = next(d for d in results.differences if {d.a, d.b} == {clean, other} and d.metric == metric)
    if d.a == clean:
        return d.mean, list(d.interval), d.n
    return -d.mean, [-d.interval[1], -d.interval[0]], d.n


def block(printed: str, start: str) -> list[str]:
    """The lines after the line starting with ``start``, up to the next blank line or unindented line."""
    lines = printed.splitlines()
    i = next(n for n, line in enumerate(lines) if line.startswith(start))
    out = []
    for line in lines[i + 1:]:
        if not line.startswith("  "):
            break
        out.append(line)
    return out


def check_json_holds_each_quantity_once(results: RagResults) -> None:
    clean = "retrieved"
    for condition, entry in results.adversarial.items():
        for rate in ("correct", "refused"):
            if rate in entry["rates"]:
                assert entry["rates"][rate] == results.generation[condition][rate], (condition, rate)
                assert entry["intervals"][rate] == results.generation_intervals[condition][rate], (condition, rate)
        delta, interval, n = oriented(results, clean, condition, "correct")
        assert (entry["drop"]["delta"], entry["drop"]["interval"], entry["drop"]["n"]) == (delta, interval, n)
        assert entry["clean_wrong_refusal_rate"] == results.generation[clean]["wrong_refusal_rate"]
        assert entry["n"] >= results.generation_n[condition]["correct"]
    for q in results.per_question.values():  # the family's per-question correct is the question's verdict
        for oc in q.conditions.values():
            if oc.info.get("family") == "counterfactual" and oc.answer is not None and oc.correct is not None:
                from evret_core.rag.scores.adversarial_scores import outcome_scores

                family = outcome_scores(oc, [a for v in q.answers for a in v])
                assert family["correct"] == float(oc.correct) == oc.scores["correct"]
                assert not (family["adopted"] and oc.correct)


def check_compact_terminal(printed: str, results: RagResults) -> None:
    conditions = results.conditions
    retrieval = block(printed, "retrieval (retrieved condition")
    assert len(retrieval) == len(results.retrieval)
    for line in retrieval:
        metric, rest = line.split(maxsplit=1)
        assert rest.strip() == shown(results.retrieval[metric], results.retrieval_intervals[metric]), metric
    table = block(printed, "generation (means")
    assert table[0].split() == ["metric", *conditions]
    for line in table[1:]:
        if line.strip().startswith("n (correct)"):
            assert line.split()[2:] == [str(results.generation_n[c]["correct"]) for c in conditions]
            continue
        metric, *cells = line.split()
        expected = [results.generation[c].get(metric) for c in conditions]
        assert cells == ["n/a" if v is None else f"{v:.3f}" for v in expected], metric
    attribution = block(printed, "attribution (gold vs retrieved")
    total = sum(results.attribution.values())
    for line in attribution:
        label, count, share = line.split()
        assert int(count) == results.attribution[label] and share == f"{int(count) / total:.1%}"
    differences = block(printed, "differences against retrieved")
    metrics = differences[0].split()[1:]
    assert metrics == ["exact", "f1", "correct"]
    for line in differences[1:]:
        condition = line.split()[0]
        cells = re.findall(CELL, line)
        for metric, cell in zip(metrics, cells, strict=True):
            mean, interval, _n = oriented(results, "retrieved", condition, metric)
            assert cell == shown(mean, interval), (condition, metric)
    families = block(printed, "adversarial conditions (rates")
    assert len(families) == len(results.adversarial)
    for line in families:
        condition, rest = line.split(maxsplit=1)
        entry = results.adversarial[condition]
        assert rest.startswith(f"n={entry['n']} skipped={entry['skipped']}: ")
        rates = dict(re.findall(r"(\w+) (\d\.\d{3})", rest.split(":", 1)[1].split(";")[0]))
        assert rates == {rate: f"{value:.3f}" for rate, value in entry["rates"].items()}, condition
        if "clean wrong refusals" in rest:
            assert rest.endswith(f"clean wrong refusals {entry['clean_wrong_refusal_rate']:.3f}")


def check_long_terminal(printed: str, results: RagResults) -> None:
    condition, seen = "", set()
    for line in block(printed, "generation (95% CI"):
        if line.strip().startswith("["):
            condition = line.strip()[1:-1]
            seen.add(condition)
            continue
        metric, rest = line.split(maxsplit=1)
        value = results.generation[condition][metric]
        n = results.generation_n[condition][metric]
        text = "n/a" if value is None else shown(value, results.generation_intervals[condition].get(metric))
        assert rest.strip() == f"{text}  (n={n})", (condition, metric)
    assert seen == set(results.conditions)
    pairs = block(printed, "differences between conditions")
    assert len(pairs) == len(results.differences)
    for line, d in zip(pairs, results.differences, strict=True):
        assert line.split()[:4] == [d.b, "-", d.a, d.metric]
        assert line.split(maxsplit=4)[4].strip() == f"{shown(d.mean, d.interval)}  (n={d.n})"
    for condition, entry in results.adversarial.items():
        header = f"  [{condition}] n={entry['n']}, skipped={entry['skipped']}"
        assert header in printed
        lines = block(printed, header)
        for rate, value in entry["rates"].items():
            line = next(x for x in lines if x.split()[0] == rate)
            assert line.split(maxsplit=1)[1].strip() == shown(value, entry["intervals"][rate]), (condition, rate)
        drop = entry["drop"]
        line = next(x for x in lines if x.strip().startswith("correct vs retrieved"))
        assert line.split("retrieved", 1)[1].strip() == (f"{shown(drop['delta'], drop['interval'])}  "
                                                          f"({drop['clean']:.3f} -> {drop['adversarial']:.3f}, "
                                                          f"n={drop['n']})")


def check_html(html: str, results: RagResults, path: Path) -> None:
    from evret_core.report.rag_document import question_drilldown

    def cell(value: float, interval: list[float] | None) -> str:
        return format_interval(value, interval)

    for condition in results.conditions:  # the headline scores (the page need not show every score)
        for metric in ("exact", "f1", "correct", "refused", "wrong_refusal_rate", "correct_refusal_rate"):
            value = results.generation[condition][metric]
            interval = results.generation_intervals[condition].get(metric)
            if value is not None and interval is not None:
                assert cell(value, interval) in html, (condition, metric)
    for d in results.differences:
        flipped = cell(-d.mean + 0.0, [-d.interval[1] + 0.0, -d.interval[0] + 0.0])
        assert cell(d.mean, d.interval) in html or flipped in html, (d.a, d.b, d.metric)
    for condition, entry in results.adversarial.items():
        for rate, value in entry["rates"].items():
            assert cell(value, entry["intervals"][rate]) in html, (condition, rate)
        assert cell(entry["drop"]["delta"], entry["drop"]["interval"]) in html, condition
    # the drill-down's verdicts are the JSON's, and no family score beside one says otherwise
    for q in question_drilldown({path.stem: results}):
        by_name = {c["name"]: c for c in q["runs"][0]["conditions"]}
        for condition, oc in results.per_question[q["id"]].conditions.items():
            verdict = by_name[condition]["verdict"]
            if oc.skipped:
                assert verdict.startswith("no case")
            elif oc.answer is None or oc.correct is None:
                assert verdict.startswith("unmeasured")
            else:  # "right", "wrong: refused", "wrong; the answer states the planted value"...
                assert verdict.split(";")[0].split(":")[0] == ("right" if oc.correct else "wrong")
            family = dict(item.rsplit(" ", 1) for item in by_name[condition]["family"].split(", ") if item)
            assert "correct" not in family or float(family["correct"]) == float(bool(oc.correct))


def run_and_check(tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str]) -> RagResults:
    out = tmp_path / "adv.json"
    base = ["rag", "--config", str(EXAMPLE / "rag.toml"), "--adversarial", FAMILIES, "--resamples", "200", *extra]
    assert main([*base, "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    results = RagResults.from_json(out)
    check_json_holds_each_quantity_once(results)
    check_compact_terminal(printed, results)
    assert main([*base, "--all-pairs"]) == 0
    check_long_terminal(capsys.readouterr().out, results)
    page = tmp_path / "adv.html"
    assert main(["report", str(out), "--format", "html", "--dataset", str(EXAMPLE / "questions.jsonl"),
                 "--corpus", str(EXAMPLE / "corpus.jsonl"), "--output", str(page)]) == 0
    check_html(page.read_text(encoding="utf-8"), results, out)
    return results


def test_every_printed_quantity_is_the_json_value_extractive(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    results = run_and_check(tmp_path, capsys, [])
    r08 = results.per_question["r08"].conditions["counterfactual"]
    assert r08.info["planted_answer"] == "2 euros per item" and r08.correct is False


def test_every_printed_quantity_is_the_json_value_with_an_adopting_answer(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The extractive run's answers, except r08's under counterfactual, which states the gold value and the planted
    one: right by F1 alone (0.57), adopted by the family's rule; it must be wrong everywhere."""
    first = tmp_path / "first.json"
    assert main(["rag", "--config", str(EXAMPLE / "rag.toml"), "--adversarial", FAMILIES, "--resamples", "20",
                 "--output", str(first)]) == 0
    capsys.readouterr()
    answers = tmp_path / "answers.jsonl"
    rows = []
    for qid, q in RagResults.from_json(first).per_question.items():
        for condition, oc in q.conditions.items():
            if oc.answer is None:
                continue
            answer = {k: v for k, v in dataclasses.asdict(oc.answer).items() if k != "metadata"}
            if (qid, condition) == ("r08", "counterfactual"):
                answer = {"text": "It is 5 euros per item. 2 euros per item.", "claims": []}
            rows.append(json.dumps({"question_id": qid, "condition": condition, **answer}))
    answers.write_text("\n".join(rows) + "\n", encoding="utf-8")
    results = run_and_check(tmp_path, capsys, ["--generator", str(answers)])
    r08 = results.per_question["r08"].conditions["counterfactual"]
    assert r08.scores["f1"] is not None and r08.scores["f1"] > 0.5
    assert r08.correct is False and results.adversarial["counterfactual"]["rates"]["adopted"] > 0
    # a results file written before the fix counted it right: the drill-down shows that verdict, and no family
    # "correct" beside it that says otherwise
    older = results.model_copy(deep=True)
    older.per_question["r08"].conditions["counterfactual"].correct = True
    from evret_core.report.rag_document import question_drilldown

    entry = next(q for q in question_drilldown({"older": older}) if q["id"] == "r08")
    line = next(c for c in entry["runs"][0]["conditions"] if c["name"] == "counterfactual")
    shown_scores = dict(item.rsplit(" ", 1) for item in line["family"].split(", "))
    assert line["verdict"] == "right; the answer states the planted value"
    assert "correct" not in shown_scores and shown_scores["adopted"] == "1"
