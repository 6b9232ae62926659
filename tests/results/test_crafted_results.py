"""Crafted results files (red team 2026-11-28, F6 and F7): every number a report, compare, gate or MLflow log
prints is checked when the file is read, and a file Evret wrote (now or earlier, with adversarial conditions or
prediction-powered estimates) still loads.

Each crafted file is built here from a results file the test produces (the bundled examples, evaluated by the CLI),
edited as the red team edited theirs."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from evret_core.cli import main
from evret_core.contracts.errors import EvretError
from evret_core.report.api import make_report
from evret_core.results.evaluation import EvaluationResults
from evret_core.results.files import load_results
from evret_core.results.rag_results import RagResults

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DATA = Path(__file__).parent / "data"
DAMAGED = "the file was edited or damaged (re-run the evaluation)"

Edit = Callable[[dict[str, Any]], Any]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Real results files: a retrieval run, the same run with prediction-powered estimates (its truth: the first 8
    queries judged by `contains`), and two RAG runs (gold/retrieved; every adversarial family)."""
    folder = tmp_path_factory.mktemp("crafted")
    paths = {name: folder / f"{name}.json" for name in ("base", "truth", "ppi", "rag", "adversarial")}
    assert main(["evaluate", "--config", str(EXAMPLES / "eval.toml"), "--output", str(paths["base"]),
                 "--no-progress"]) == 0
    subset = folder / "subset.jsonl"
    subset.write_text("".join((EXAMPLES / "dataset.jsonl").read_text(encoding="utf-8").splitlines(True)[:8]),
                      encoding="utf-8")
    assert main(["evaluate", "--dataset", str(subset), "--retriever", "bm25", "--retriever-option",
                 f"corpus={EXAMPLES / 'corpus.jsonl'}", "--judge", "contains", "--metric", "hit_rate@1",
                 "--metric", "recall@5", "--metric", "mrr@10", "--output", str(paths["truth"]), "--no-progress"]) == 0
    assert main(["calibrate", "--results", str(paths["base"]), "--ppi-truth", str(paths["truth"]),
                 "-o", str(paths["ppi"])]) == 0
    rag = ["rag", "--config", str(EXAMPLES / "rag" / "rag.toml"), "--no-progress"]
    assert main([*rag, "--output", str(paths["rag"])]) == 0
    assert main([*rag, "--adversarial", "counterfactual,injection,missing-gold,irrelevant-only",
                 "--output", str(paths["adversarial"])]) == 0
    return paths


def craft(runs: dict[str, Path], source: str, edit: Edit, tmp_path: Path, name: str = "crafted.json") -> Path:
    data = json.loads(runs[source].read_text(encoding="utf-8"))
    edit(data)
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")  # NaN written as the bare word, as a hand edit
    return path


def refused(path: Path, message: str) -> None:
    with pytest.raises(EvretError) as caught:
        load_results(path)
    text = str(caught.value)
    assert text.startswith(f"{path}: ") and re.search(message, text), text
    assert text.endswith(DAMAGED) or "damaged" in text, text


# -- what Evret wrote loads ------------------------------------------------------------------------------------
def test_every_file_evret_writes_loads(runs: dict[str, Path]) -> None:
    for name in ("base", "truth", "ppi"):
        assert isinstance(load_results(runs[name]), EvaluationResults)
    ppi = load_results(runs["ppi"])
    assert isinstance(ppi, EvaluationResults) and set(ppi.prediction_powered) == {"hit_rate@1", "recall@5", "mrr@10"}
    assert ppi.slices and ppi.confidence_level == 0.95
    for name in ("rag", "adversarial"):
        assert isinstance(load_results(runs[name]), RagResults)
    adversarial = load_results(runs["adversarial"])
    assert isinstance(adversarial, RagResults)
    assert set(adversarial.adversarial) == {"counterfactual", "injection", "missing-gold", "irrelevant-only"}
    for fixture in ("retrieval-v1.json", "retrieval-v2.json", "rag-v1.json"):  # written by earlier code
        load_results(DATA / fixture)


def test_a_ppi_entry_written_before_clipping_still_loads(runs: dict[str, Path], tmp_path: Path) -> None:
    def unclipped(data: dict[str, Any]) -> None:  # the entries of 3b99129..ea924b1: no value_range, no clipping
        for entry in data["prediction_powered"].values():
            for key in ("value_range", "unclipped_estimate", "unclipped_interval"):
                entry.pop(key)
            entry["estimate"] = entry["judged"] + entry["rectifier"]
            half = (entry["interval"][1] - entry["interval"][0]) / 2
            entry["interval"] = [entry["estimate"] - half, entry["estimate"] + half]

    assert load_results(craft(runs, "ppi", unclipped, tmp_path)).prediction_powered  # type: ignore[attr-defined]


# -- retrieval files: F6 ----------------------------------------------------------------------------------------
def _every_slice(metric: str, value: float) -> Edit:
    def edit(data: dict[str, Any]) -> None:
        for groups in data["slices"].values():
            for cell in groups.values():
                cell["scores"][metric] = value
    return edit


def _first_slice(data: dict[str, Any]) -> dict[str, Any]:
    return data["slices"]["topic"][sorted(data["slices"]["topic"])[0]]  # type: ignore[no-any-return]


def _drop_metric(metric: str) -> Edit:
    def edit(data: dict[str, Any]) -> None:
        for record in data["per_query"].values():
            record["scores"].pop(metric)
        data["scores"][metric] = 0.99
    return edit


def _ppi(**changes: Any) -> Edit:
    def edit(data: dict[str, Any]) -> None:
        data["prediction_powered"]["recall@5"].update(changes)
    return edit


@pytest.mark.parametrize(("source", "edit", "message"), [
    # RS01: slice means against the per-query values of the slice's queries
    ("base", _every_slice("recall@5", 0.0123),
     r"slices\.topic\.\w+\.scores\.recall@5 is 0\.0123 but the mean of its \d+ per-query values is"),
    ("base", lambda d: _first_slice(d).update(n=99), r"slices\.topic\.\w+\.n is 99 but \d+ queries have topic="),
    ("base", lambda d: d["slices"]["topic"].update(astrology=_first_slice(d)),
     r"slices\.topic\.astrology: no query has topic='astrology'"),
    ("base", lambda d: d["slices"].update(mood=d["slices"]["topic"]), r"slices\.mood\.\w+: no query has mood="),
    # RS02: a mean whose metric no query holds
    ("base", _drop_metric("recall@5"), r"scores\.recall@5 is 0\.99 but no query holds recall@5"),
    # RS03/RS04: the confidence level
    ("base", lambda d: d.update(confidence_level=5.0), r"confidence_level is 5\.0; a confidence level lies strictly"),
    ("base", lambda d: d.update(confidence_level=math.nan), r"confidence_level is nan; a confidence level"),
    ("base", lambda d: d.update(confidence_level=0), r"confidence_level is 0\.0; a confidence level"),
    # RS09/RS09b/RS08: prediction-powered estimates and intervals
    ("ppi", _ppi(estimate=7.5, interval=[9, -3], n_labelled=-4), r"prediction_powered\.recall@5\.estimate is 7\.5, "
                                                                 r"outside \[0, 1\]"),
    ("ppi", _ppi(estimate=math.nan), r"prediction_powered\.recall@5\.estimate is nan, not a finite number"),
    ("ppi", _ppi(interval=[0.9, 0.1]), r"prediction_powered\.recall@5\.interval is \[0\.9, 0\.1\]"),
    ("ppi", _ppi(n_labelled="<img src=x onerror=alert(1)> | ![p](https://evil.example/x.png)"),
     r"prediction_powered\.recall@5\.n_labelled is '<img .*; a count is a whole number from 0 to 22"),
    ("ppi", _ppi(n_labelled=23), r"prediction_powered\.recall@5\.n_labelled is 23; a count is a whole number from 0 "
                                 r"to 22"),
    ("ppi", _ppi(n=40), r"prediction_powered\.recall@5\.n is 40; a count is a whole number from 0 to 22"),
    ("ppi", _ppi(estimate=0.2, interval=[0.1, 0.3]),
     r"prediction_powered\.recall@5\.estimate is 0\.2 but judged \+ rectifier is "),
    ("ppi", _ppi(judged=0.5), r"prediction_powered\.recall@5\.judged is 0\.5 but the mean of its 22 per-query values"),
    ("ppi", _ppi(confidence_level=42), r"prediction_powered\.recall@5\.confidence_level is 42\.0; a confidence level"),
    ("ppi", lambda d: d["prediction_powered"].update(astrology=d["prediction_powered"]["recall@5"]),
     r"prediction_powered\.astrology: the run has no metric astrology"),
    ("ppi", lambda d: d["prediction_powered"]["recall@5"].pop("estimate"),
     r"prediction_powered\.recall@5 has no estimate"),
    # RS07: manifest field types
    ("base", lambda d: d["manifest"]["dataset"].update(hash=123456789),
     r"manifest\.dataset\.hash is 123456789 \(int\); a dataset hash is a string"),
    ("base", lambda d: d["manifest"]["dataset"].update(name=["x"]), r"manifest\.dataset\.name is \['x'\] \(list\)"),
    ("base", lambda d: d["manifest"]["dataset"].update(num_queries="22"),
     r"manifest\.dataset\.num_queries is '22'; a count is a whole number"),
])
def test_a_crafted_retrieval_file_is_refused(runs: dict[str, Path], tmp_path: Path, source: str, edit: Edit,
                                             message: str) -> None:
    refused(craft(runs, source, edit, tmp_path), message)


def test_slice_means_within_the_stated_tolerance_load(runs: dict[str, Path], tmp_path: Path) -> None:
    """A slice mean that differs from the recomputed one by float rounding only (another summation order) loads."""
    from evret_core.results.model import MEAN_TOLERANCE

    def nudge(data: dict[str, Any]) -> None:
        for groups in data["slices"].values():
            for cell in groups.values():
                cell["scores"]["mrr@10"] *= 1 + MEAN_TOLERANCE / 10
    load_results(craft(runs, "base", nudge, tmp_path))


def test_a_slice_lacking_a_metric_is_reported_not_a_traceback(runs: dict[str, Path], tmp_path: Path) -> None:
    """RS17b/c: the Markdown and LaTeX writers show n/a for a metric a slice lacks (the HTML report already did)."""
    def lack(data: dict[str, Any]) -> None:
        for groups in data["slices"].values():
            for cell in groups.values():
                cell["scores"].pop("ndcg@10")
                cell["intervals"].pop("ndcg@10")

    path = craft(runs, "base", lack, tmp_path)
    markdown = make_report(path, format="markdown")
    row = next(line for line in markdown.splitlines() if line.startswith("| biology"))
    assert row.endswith("| n/a |")
    latex = make_report(path, format="latex")
    assert re.search(r"^biology .* & n/a \\\\$", latex, re.M)


@pytest.mark.parametrize("command", ["compare", "report"])
def test_an_int_dataset_hash_is_one_line_naming_the_file(runs: dict[str, Path], tmp_path: Path, command: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """RS07/RS07b/RS07c: `evret compare` and `evret report` of a file whose dataset hash is a number."""
    number = craft(runs, "base", lambda d: d["manifest"]["dataset"].update(hash=123456789), tmp_path, "hashint.json")
    text = craft(runs, "base", lambda d: d["manifest"]["dataset"].update(hash="abc"), tmp_path, "hashstr.json")
    capsys.readouterr()
    assert main([command, str(number), str(text)]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [f"evret: error: {number}: manifest.dataset.hash is 123456789 (int); a dataset hash "
                                f"is a string; {DAMAGED}"]


# -- RAG files: F6 ----------------------------------------------------------------------------------------------
def _each_attribution(value: int) -> Edit:
    def edit(data: dict[str, Any]) -> None:
        data["attribution"] = dict.fromkeys(data["attribution"], value)
    return edit


def _move_attribution(data: dict[str, Any]) -> None:
    """One question moved from both_right to generator_failure in the counts: the sum still adds up."""
    counts = data["attribution"]
    counts["both_right"] -= 1
    counts["generator_failure"] += 1


def _swap_attribution(data: dict[str, Any]) -> None:
    counts = data["attribution"]
    counts["both_right"], counts["generator_failure"] = counts["generator_failure"], counts["both_right"]


def _differences(**changes: Any) -> Edit:
    def edit(data: dict[str, Any]) -> None:
        for entry in data["differences"]:
            entry.update(changes)
    return edit


def _rag_slices(value: float) -> Edit:
    def edit(data: dict[str, Any]) -> None:
        for groups in data["slices"].values():
            for by_condition in groups.values():
                for cells in by_condition.values():
                    for metric in cells:
                        if metric != "n" and cells[metric] is not None:
                            cells[metric] = value
    return edit


def _adversarial(condition: str, change: Callable[[dict[str, Any]], None]) -> Edit:
    def edit(data: dict[str, Any]) -> None:
        change(data["adversarial"][condition])
    return edit


def _rates(value: float) -> Edit:
    def edit(data: dict[str, Any]) -> None:
        for entry in data["adversarial"].values():
            entry["rates"] = dict.fromkeys(entry["rates"], value)
    return edit


@pytest.mark.parametrize(("source", "edit", "message"), [
    # RS14
    ("rag", lambda d: d.update(confidence_level=42), r"confidence_level is 42\.0; a confidence level lies strictly"),
    # RS10/RS10b: attribution counts
    ("rag", _each_attribution(-5), r"attribution\.both_right is -5; a count is a whole number from 0 to 13"),
    ("rag", lambda d: d["attribution"].update(both_right=1000000),
     r"attribution\.both_right is 1000000; a count is a whole number from 0 to 13"),
    ("rag", _move_attribution, r"attribution\.both_right is \d+ but \d+ questions' per-question attribution is "
     r"both_right"),
    ("rag", _swap_attribution, r"attribution\.both_right is \d+ but \d+ questions' per-question attribution"),
    ("rag", lambda d: d["attribution"].update(astrology=0), r"attribution\.astrology: not an attribution"),
    ("rag", lambda d: d["per_question"]["r01"].update(attribution="astrology"),
     r"question 'r01': attribution 'astrology' is not one of both_right"),
    # RS12: differences recomputed from the per-question values
    ("rag", _differences(mean=0.9, interval=[0.8, 0.95]),
     r"differences: exact \(retrieved - gold\)\.mean is 0\.9 but the mean of its 13 per-question values is"),
    ("rag", _differences(n=99), r"differences: exact \(retrieved - gold\)\.n is 99 but 13 questions have both"),
    ("rag", _differences(a="astrology"), r"differences: exact \(retrieved - astrology\): no condition astrology"),
    ("rag", _differences(interval=[-3.0, 2.0]),
     r"differences: exact \(retrieved - gold\)\.interval is \[-3\.0, 2\.0\], outside \[-1, 1\]"),
    # RS13: slices recomputed from the per-question values of their questions
    ("rag", _rag_slices(0.0), r"slices\.\w+\.\w+\.gold\.\w+ is 0\.0 but the mean of its \d+ per-question values"),
    ("rag", lambda d: next(iter(next(iter(d["slices"].values())).values()))["gold"].update(n=40.0),
     r"slices\.\w+\.\w+\.gold\.n is 40\.0 but \d+ questions have"),
    ("rag", lambda d: d["slices"].update(mood=next(iter(d["slices"].values()))),
     r"slices\.mood\.\w+: no question has mood="),
    # RS02 in RAG files: a mean whose score no question holds
    ("rag", lambda d: d["generation"]["gold"].update(astrology=0.5),
     r"generation\.gold\.astrology is 0\.5 but no question holds gold/astrology"),
    ("rag", lambda d: d["retrieval"].update({"ndcg@3": 0.5}),
     r"retrieval\.ndcg@3 is 0\.5 but no question holds retrieval/ndcg@3"),
    ("rag", lambda d: d["generation"]["gold"].update(has_ans_exact=0.9),
     r"generation\.gold\.has_ans_exact is 0\.9 but the mean of its \d+ per-question values is"),
    ("rag", lambda d: d["generation_n"]["gold"].update(f1=99), r"generation_n\.gold\.f1 is 99 but \d+ questions "
                                                               r"have gold/f1"),
    # RS15: the adversarial section
    ("adversarial", _rates(7.25), r"adversarial\.counterfactual\.rates\.adopted is 7\.25, outside \[0, 1\]"),
    ("adversarial", _adversarial("missing-gold", lambda e: e["rates"].update(refused=12 / 13)),
     r"adversarial\.missing-gold\.rates\.refused is 0\.923\d* but the mean of its 13 per-question values is 1\.0"),
    ("adversarial", _adversarial("missing-gold", lambda e: e["rates"].update(refused=0.5)),
     r"adversarial\.missing-gold\.rates\.refused is 0\.5, not a share of the 13 measured answers"),
    ("adversarial", _adversarial("injection", lambda e: e["rates"].update(correct=0.2)),
     r"adversarial\.injection\.rates\.correct is 0\.2 but the mean of its 13 per-question values"),
    ("adversarial", _adversarial("counterfactual", lambda e: e["rates"].update(adopted=0.3)),
     r"adversarial\.counterfactual\.rates\.adopted is 0\.3, not a share of the \d+ measured answers"),
    ("adversarial", _adversarial("counterfactual", lambda e: e.update(n=12)),
     r"adversarial\.counterfactual\.n is 12 but \d+ answers were measured"),
    ("adversarial", _adversarial("counterfactual", lambda e: e.update(skipped=0)),
     r"adversarial\.counterfactual\.skipped is 0 but \d+ questions were skipped"),
    ("adversarial", _adversarial("injection", lambda e: e.update(family="counterfactual")),
     r"adversarial\.injection\.family is 'counterfactual' but its questions' family is 'injection'"),
    ("adversarial", _adversarial("injection", lambda e: e["rates"].update(adopted=0.0)),
     r"adversarial\.injection\.rates\.adopted: not a rate of the injection family"),
    ("adversarial", _adversarial("injection", lambda e: e["intervals"].update(leaked=[0.5, 0.1])),
     r"adversarial\.injection\.intervals\.leaked is \[0\.5, 0\.1\]"),
    ("adversarial", _adversarial("missing-gold", lambda e: e.update(clean_wrong_refusal_rate=0.9)),
     r"adversarial\.missing-gold\.clean_wrong_refusal_rate is 0\.9 but the mean of its \d+ per-question values"),
    ("adversarial", _adversarial("missing-gold", lambda e: e["drop"].update(delta=-0.9)),
     r"adversarial\.missing-gold\.drop\.delta is -0\.9 but adversarial - clean is "),
    ("adversarial", _adversarial("missing-gold", lambda e: e["drop"].update(clean=0.1)),
     r"adversarial\.missing-gold\.drop\.clean is 0\.1 but the mean of its 13 per-question values is"),
    ("adversarial", _adversarial("injection", lambda e: e["drop"].update(n=12)),
     r"adversarial\.injection\.drop\.n is 12 but 13 questions were measured under both retrieved and injection"),
    ("adversarial", _adversarial("injection", lambda e: next(iter(e["slices"].values())).update(
        x={"n": 99, "rates": {}, "intervals": {}})),
     r"adversarial\.injection\.slices\.[\w:]+\.x\.n is 99; a count is a whole number from 0 to 13"),
    ("adversarial", _adversarial("injection", lambda e: next(iter(next(iter(e["slices"].values())).values()))[
        "rates"].update(leaked=3.0)), r"adversarial\.injection\.slices\.[\w:]+\.\w+\.rates\.leaked is 3\.0, outside"),
    ("adversarial", lambda d: d["adversarial"].update(astrology=d["adversarial"]["injection"]),
     r"adversarial\.astrology: no condition astrology"),
])
def test_a_crafted_rag_file_is_refused(runs: dict[str, Path], tmp_path: Path, source: str, edit: Edit,
                                       message: str) -> None:
    refused(craft(runs, source, edit, tmp_path), message)


def test_mlflow_never_sees_a_negative_attribution(runs: dict[str, Path], tmp_path: Path) -> None:
    """ML17: log_to_mlflow reads files through load_results, which now refuses the crafted counts."""
    from evret_core.report.tracking import log_to_mlflow

    path = craft(runs, "rag", _each_attribution(-5), tmp_path)
    with pytest.raises(EvretError, match=r"attribution\.both_right is -5"):
        log_to_mlflow(load_results(path), tmp_path / "mlruns")
    assert not (tmp_path / "mlruns").exists()
