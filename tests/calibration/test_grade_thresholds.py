"""Graded calibration: fit_cuts on synthetic scores, graded labels derived from qrels, a graded judge's agreement with
them, and `evret calibrate --queries --qrels --corpus` end to end against a stub LLM server."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from evret_core.calibration.grade_thresholds import calibrate_graded, fit_cuts
from evret_core.calibration.labels import derive_graded_labels
from evret_core.calibration.save_threshold import save_threshold
from evret_core.cli import main
from evret_core.contracts.errors import EvretError
from evret_core.contracts.judge import Judge, JudgmentContext
from evret_core.testing.llm_provider import register_stub_provider, stub_options
from evret_core.testing.llm_stubs import StubLLMServer, StubRequest, isolate_llm_env


def test_fit_cuts_finds_the_boundaries_of_separable_grades_and_stays_non_decreasing() -> None:
    rng = np.random.default_rng(0)
    grades = rng.integers(0, 4, size=150)  # fewer scores than the sweep's 200 candidates: every score is one
    scores = grades * 0.25 + rng.uniform(0.0, 0.2, size=150)  # grade g lies in [0.25 g, 0.25 g + 0.2)
    fitted = fit_cuts(scores, grades, 3)
    for cut, t in enumerate(fitted, start=1):
        assert 0.25 * cut <= t < 0.25 * cut + 0.2  # a score of grade `cut`'s band: the lowest one
        assert np.array_equal(scores >= t, grades >= cut)
    # a score that orders the grades backwards for one cut would give a smaller threshold: the running max holds
    crossed = fit_cuts([0.9, 0.1, 0.5, 0.6, 0.95, 0.2], [1, 0, 2, 2, 3, 3], 3)
    assert crossed == sorted(crossed)


def test_fit_cuts_refuses_mismatched_or_empty_input() -> None:
    with pytest.raises(EvretError, match="one score per grade"):
        fit_cuts([0.1, 0.2], [1], 3)
    with pytest.raises(EvretError, match="finite"):
        fit_cuts([float("nan")], [1], 3)


QUERIES = {"q1": "how tall is the eiffel tower", "q2": "what do bees eat"}
CORPUS = {"d1": {"text": "The Eiffel Tower is 330 metres tall."}, "d2": {"text": "Paris has many museums."},
          "d3": {"text": "Bees eat nectar and pollen."}, "d4": {"text": "Bananas are yellow."}}
QRELS = {"q1": {"d1": 3.0, "d2": 1.0, "d4": 0.0}, "q2": {"d3": 2.0, "d4": 0.0}}


def test_graded_labels_are_every_qrels_pair_with_its_texts_and_grade() -> None:
    labels = derive_graded_labels(QUERIES, QRELS, CORPUS)
    assert [(x.query_id, x.doc_id, x.grade) for x in labels] == [
        ("q1", "d1", 3.0), ("q1", "d2", 1.0), ("q1", "d4", 0.0), ("q2", "d3", 2.0), ("q2", "d4", 0.0)]
    assert labels[0].query == QUERIES["q1"] and labels[0].retrieved_text == CORPUS["d1"]["text"]
    assert labels[0].expected == () and labels[0].label is True and labels[2].label is False
    sample = derive_graded_labels(QUERIES, QRELS, CORPUS, sample=3, seed=1)
    assert len(sample) == 3 and sample == derive_graded_labels(QUERIES, QRELS, CORPUS, sample=3, seed=1)
    assert [labels.index(x) for x in sample] == sorted(labels.index(x) for x in sample)  # qrels order kept
    with pytest.raises(EvretError, match="'q3' has no text"):
        derive_graded_labels(QUERIES, {**QRELS, "q3": {"d1": 1}}, CORPUS)
    with pytest.raises(EvretError, match="'d9' is not in the corpus"):
        derive_graded_labels(QUERIES, {"q1": {"d9": 1}}, CORPUS)


class WordGrade(Judge):
    """A reference-free 0-3 judge for the tests: the passage's score is its share of the query's words."""

    name = "word-grade"
    reference_free = True
    grades = 3
    cut = 2

    def __init__(self, thresholds: Sequence[float] = (0.2, 0.4, 0.6)) -> None:
        self.thresholds = list(thresholds)

    def judge(self, context: JudgmentContext) -> bool:
        return self.batch_judge([context])[0] is True

    def batch_score(self, contexts: Sequence[JudgmentContext]) -> list[float | None]:
        out: list[float | None] = []
        for c in contexts:
            query = set(re.findall(r"\w+", c.query.lower()))
            out.append(len(query & set(re.findall(r"\w+", c.retrieved_text.lower()))) / len(query))
        return out

    def batch_grade(self, contexts: Sequence[JudgmentContext]) -> list[float | None]:
        return [float(sum(s >= t for t in self.thresholds)) for s in self.batch_score(contexts)
                if s is not None]

    def batch_judge(self, contexts: Sequence[JudgmentContext]) -> list[bool | None]:
        return [g >= self.cut for g in self.batch_grade(contexts) if g is not None]


def test_calibrate_graded_measures_agreement_and_fits_thresholds() -> None:
    labels = derive_graded_labels(QUERIES, QRELS, CORPUS)
    result = calibrate_graded(WordGrade(), labels, n_resamples=50)
    agreement = result["agreement"]
    assert agreement["pairs"] == 5 and agreement["queries"] == 2 and "leaderboard" not in agreement
    assert result["judge"] == "word-grade" and result["grades"] == 3 and result["unmeasured"] == 0
    scores = WordGrade().batch_score([JudgmentContext(query=x.query, expected_text="", retrieved_text=x.retrieved_text)
                                      for x in labels])
    assert result["fitted_thresholds"] == fit_cuts([float(s or 0.0) for s in scores],
                                                   [float(x.grade or 0.0) for x in labels], 3, "kappa")
    with pytest.raises(EvretError, match="reference-free graded judge"):
        calibrate_graded(type("YesNo", (Judge,), {"judge": lambda self, c: True})(), labels)


def test_save_threshold_writes_a_list(tmp_path: Path) -> None:
    config = tmp_path / "eval.toml"
    config.write_text('[judge]\nname = "query-similarity"\nthresholds = [0.1, 0.2, 0.3]\n', encoding="utf-8")
    text = save_threshold(config, "query-similarity", "thresholds", [0.25, 0.5, 0.75])
    assert 'thresholds = [0.25, 0.5, 0.75]' in text and "0.1" not in text


def grade_by_passage(request: StubRequest) -> str:
    grades = {"The Eiffel Tower is 330 metres tall.": 3, "Paris has many museums.": 1,
              "Bees eat nectar and pollen.": 3, "Bananas are yellow.": 0}
    passage = re.search(r"<passage-([0-9a-f]+)>\n(.*?)\n</passage-\1>", request.prompt, re.S)
    assert passage, request.prompt
    return json.dumps({"grade": grades[passage.group(2)]})


def write_inputs(tmp_path: Path) -> list[str]:
    (tmp_path / "queries.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in QUERIES.items()), encoding="utf-8")
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, **v}) + "\n" for d, v in CORPUS.items()),
                                           encoding="utf-8")
    (tmp_path / "qrels.txt").write_text("".join(f"{q} 0 {d} {int(g)}\n" for q, docs in QRELS.items()
                                                for d, g in docs.items()), encoding="utf-8")
    return ["--queries", str(tmp_path / "queries.tsv"), "--qrels", str(tmp_path / "qrels.txt"),
            "--corpus", str(tmp_path / "corpus.jsonl")]


def test_evret_calibrate_grades_the_qrels_pairs_with_the_relevance_judge(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    isolate_llm_env(monkeypatch, tmp_path, "EVRET_STUB_API_KEY")
    with StubLLMServer(grade_by_passage) as server:
        options = [f"--judge-option={k}={v}" for k, v in {**stub_options(server), "cache": "false"}.items()]
        out = tmp_path / "calibration.json"
        args = ["calibrate", *write_inputs(tmp_path), "--judge", "relevance", *options, "--n-resamples", "50"]
        assert main([*args, "-o", str(out), "--json"]) == 0
        document = json.loads(out.read_text(encoding="utf-8"))
        assert document["labels"] == {"pairs": 5, "queries": 2, "sample": None, "seed": 0,
                                      "grades": {"0": 2, "1": 1, "2": 1, "3": 1}}
        [entry] = document["graded"]
        assert entry["judge"] == "relevance" and entry["stats"]["grades"] == {"0": 2, "1": 1, "2": 0, "3": 2}
        # the judge gave the same grade as the qrels on 4 of 5 pairs (it said 3 where the qrels say 2)
        assert entry["agreement"]["exact_agreement"]["value"] == pytest.approx(4 / 5)
        assert entry["agreement"]["confusion"]["matrix"] == [[2, 0, 0, 0], [0, 1, 0, 0], [0, 0, 0, 1], [0, 0, 0, 1]]
        assert len(server.requests) == 5
        capsys.readouterr()
        assert main(args) == 0
        printed = capsys.readouterr().out
        assert "5 graded pairs over 2 queries" in printed and "exact 0.800" in printed


def test_evret_calibrate_graded_refusals_are_one_line_before_any_call(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inputs = write_inputs(tmp_path)
    assert main(["calibrate", *inputs, "--judge", "contains"]) == 2
    assert "needs a reference-free graded judge" in capsys.readouterr().err
    assert main(["calibrate", *inputs[:4], "--judge", "contains"]) == 2  # no --corpus
    assert "--corpus" in capsys.readouterr().err
    assert main(["calibrate", *inputs, "--sample", "0"]) == 2
    assert "--sample" in capsys.readouterr().err
    (tmp_path / "bad.tsv").write_text("q1 no tab here\n", encoding="utf-8")
    bad = ["--queries", str(tmp_path / "bad.tsv"), *inputs[2:]]
    register_stub_provider()
    assert main(["calibrate", *bad, "--judge", "relevance", "--judge-option", "provider=stub",
                 "--judge-option", "api_key=sk"]) == 2
    assert "bad.tsv:1: expected query_id<TAB>text, found no tab" in capsys.readouterr().err


def test_an_output_onto_the_queries_file_is_refused_before_any_work(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inputs = write_inputs(tmp_path)
    before = (tmp_path / "queries.tsv").read_text(encoding="utf-8")
    assert main(["calibrate", *inputs, "--judge", "contains", "-o", inputs[1]]) == 2
    assert "queries.tsv" in capsys.readouterr().err
    assert (tmp_path / "queries.tsv").read_text(encoding="utf-8") == before
