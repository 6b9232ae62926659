"""One results model: retrieval and RAG results read by one `load_results`, files of the previous schemas included
(tests/results/data: retrieval v1 written by the code of 8b98336~1, retrieval v2 and RAG v1 by the code before the
one results model, the two `*-before-34.json` by the code before issue 34's restructure: `evret evaluate` on
examples/eval.toml and `evret rag` with the LLM parts on the stub, tests/golden/make.py's `evaluate` and `rag-llm`),
scores in one shape, and RAG files checked for numbers Evret cannot have written."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from evret_core import EvretError
from evret_core.results.evaluation import EvaluationResults
from evret_core.results.files import load_results, load_runs
from evret_core.results.gates import check_fail_under
from evret_core.results.model import Results, ScoreView
from evret_core.results.rag_results import RagResults

DATA = Path(__file__).parent / "data"
RETRIEVAL_V1, RETRIEVAL_V2, RAG_V1 = DATA / "retrieval-v1.json", DATA / "retrieval-v2.json", DATA / "rag-v1.json"
RETRIEVAL_34, RAG_34 = DATA / "retrieval-before-34.json", DATA / "rag-before-34.json"


def test_files_of_the_previous_schemas_load_as_their_kind() -> None:
    v1 = load_results(RETRIEVAL_V1)
    assert isinstance(v1, EvaluationResults) and v1.schema_version == 1
    assert v1.intervals == {} and v1.manifest is None and v1.scores["mrr@2"] == pytest.approx(2 / 3)
    v2 = load_results(RETRIEVAL_V2)
    assert isinstance(v2, EvaluationResults) and v2.schema_version == 2 and set(v2.slices) == {"kind"}
    rag = load_results(RAG_V1)
    assert isinstance(rag, RagResults) and rag.schema_version == 1
    assert rag.conditions == ["gold", "retrieved"] and set(rag.per_question) == {"qa", "qb", "qc", "qd"}
    # the same files through the kinds' own readers, and written back byte for byte
    assert EvaluationResults.from_json(RETRIEVAL_V2) == v2 and RagResults.from_json(RAG_V1) == rag
    assert v2.to_json() + "\n" == RETRIEVAL_V2.read_text(encoding="utf-8")
    assert rag.to_json() + "\n" == RAG_V1.read_text(encoding="utf-8")


@pytest.mark.parametrize(("fixture", "kind"), [(RETRIEVAL_34, EvaluationResults), (RAG_34, RagResults)])
def test_files_written_before_the_restructure_load_and_write_back_byte_for_byte(fixture: Path, kind: type) -> None:
    results = load_results(fixture)
    assert type(results) is kind and kind.from_json(fixture) == results
    assert results.to_json() + "\n" == fixture.read_text(encoding="utf-8")
    if isinstance(results, RagResults):  # the answers the LLM generator gave, with their claims and citations
        outcome = results.per_question["r01"].conditions["gold"]
        assert outcome.answer is not None and outcome.answer.claims and outcome.answer.claims[0].citations
        assert outcome.claims and outcome.claims[0].verdict == "supported"


@pytest.mark.parametrize("fixture", [RETRIEVAL_V1, RETRIEVAL_V2, RAG_V1, RETRIEVAL_34, RAG_34])
def test_both_kinds_round_trip_through_load_results(fixture: Path, tmp_path: Path) -> None:
    results = load_results(fixture)
    path = tmp_path / "again.json"
    results.write(path)
    again = load_results(path)
    expected = results.redacted()  # the v1 file was written before redaction existed: its api_key goes
    assert type(again) is type(results) and again == expected
    assert load_results(path.read_text(encoding="utf-8")) == expected  # the JSON text itself


def test_scores_in_one_shape() -> None:
    retrieval, rag = load_results(RETRIEVAL_V2), load_results(RAG_V1)
    assert isinstance(retrieval, EvaluationResults) and isinstance(rag, RagResults)
    view = retrieval.score_view()
    assert isinstance(view, ScoreView)
    assert view.scores == retrieval.scores and view.intervals == retrieval.intervals
    assert view.per_query["q0"] == retrieval.per_query["q0"].scores
    rag_view = rag.score_view()
    assert rag_view.scores["gold/f1"] == rag.generation["gold"]["f1"]
    assert rag_view.intervals["retrieval/mrr@10"] == rag.retrieval_intervals["mrr@10"]
    assert rag_view.per_query["qa"]["retrieved/correct"] == rag.per_question["qa"].conditions["retrieved"].scores[
        "correct"]
    # what the gates read, whichever the kind
    assert [f.metric for f in check_fail_under(rag_view, {"retrieved/correct": 0.5, "gold/correct": 0.5})] == [
        "retrieved/correct"]
    assert [f.metric for f in check_fail_under(view, {"mrr@2": 0.9})] == ["mrr@2"]
    for results in (retrieval, rag):
        assert isinstance(results, Results) and results.elapsed_s is not None and results.elapsed_s >= 0
        assert results.manifest_dict()["evret_version"]


def test_the_manifest_and_the_written_file_are_redacted(tmp_path: Path) -> None:
    v1 = load_results(RETRIEVAL_V1)  # written before redaction existed: its retriever config holds an api_key
    assert v1.config["retriever"]["api_key"] == "sk-should-not-matter"
    assert v1.redacted().config["retriever"]["api_key"] == "***"
    assert v1.config["retriever"]["api_key"] == "sk-should-not-matter"  # a copy
    v1.write(tmp_path / "out.json")
    assert "sk-should-not-matter" not in (tmp_path / "out.json").read_text(encoding="utf-8")
    rag = load_results(RAG_V1)
    rag.config["generator"] = {"name": "llm", "api_key": "sk-rag-secret-123"}
    rag.write(tmp_path / "rag.json")
    assert "sk-rag-secret-123" not in (tmp_path / "rag.json").read_text(encoding="utf-8")


def test_the_kind_asked_for_and_errors_that_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(EvretError, match=r"rag-v1.json: is a rag results file; retrieval results are needed"):
        load_results(RAG_V1, kind="retrieval")
    with pytest.raises(EvretError, match=r"retrieval-v2.json: is a retrieval results file; rag results"):
        load_results(RETRIEVAL_V2, kind="rag")
    with pytest.raises(EvretError, match=r"missing.json: no such results file"):
        load_results(tmp_path / "missing.json")
    other = tmp_path / "other.json"
    other.write_text('{"hello": 1}', encoding="utf-8")
    with pytest.raises(EvretError, match=r"other.json: not an Evret results file"):
        load_results(other)
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "evret-rag",\n "x": ', encoding="utf-8")
    with pytest.raises(EvretError, match=r"bad.json:2: invalid JSON"):
        load_results(bad)
    newer = tmp_path / "newer.json"
    newer.write_text('{"schema": "evret-rag", "schema_version": 99, "conditions": []}', encoding="utf-8")
    with pytest.raises(EvretError, match=r"newer.json: RAG results schema_version 99 is newer than this Evret"):
        load_results(newer)
    with pytest.raises(EvretError, match="compare RAG runs .* with RAG runs"):
        load_runs([RAG_V1, RETRIEVAL_V2])


def _corrupt(tmp_path: Path, edit: Any) -> Path:
    data = json.loads(RAG_V1.read_text(encoding="utf-8"))
    edit(data)
    path = tmp_path / "damaged.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize(("edit", "message"), [
    (lambda d: d["per_question"]["qa"]["conditions"]["gold"]["scores"].update(f1=7.0),
     r"damaged.json: question 'qa': gold/f1 is 7.0, outside \[0, 1\]"),
    (lambda d: d["per_question"]["qb"]["conditions"]["retrieved"]["scores"].update(exact=math.nan),
     r"damaged.json: question 'qb': retrieved/exact is nan, not a finite number"),
    (lambda d: d["per_question"]["qc"]["retrieval"].update({"recall@5": 1.5}),
     r"damaged.json: question 'qc': retrieval/recall@5 is 1.5, outside \[0, 1\]"),
    (lambda d: d["generation"]["gold"].update(f1=0.1),
     r"damaged.json: generation.gold.f1 is 0.1 but the mean of its 4 per-question values is 0.75"),
    (lambda d: d["retrieval"].update({"mrr@10": 0.9}),
     r"damaged.json: retrieval.mrr@10 is 0.9 but the mean of its 3 per-question values is 0.5"),
    (lambda d: d["generation_intervals"]["retrieved"].update(correct=[0.8, 0.1]),
     r"damaged.json: generation_intervals.retrieved.correct is \[0.8, 0.1\]; an interval is \[low, high\]"),
    (lambda d: d["per_question"].update(qa=d["per_question"]["qb"]),
     r"damaged.json: per_question key 'qa' holds the record of question 'qb'"),
    (lambda d: d["per_question"]["qa"]["conditions"]["gold"].update(scores="high"),
     r"damaged.json: per_question.qa.conditions.gold.scores: Input should be a valid dictionary"),
])
def test_a_damaged_rag_file_is_refused_naming_file_question_and_score(tmp_path: Path, edit: Any,
                                                                      message: str) -> None:
    path = _corrupt(tmp_path, edit)
    with pytest.raises(EvretError, match=message):
        load_results(path)
    with pytest.raises(EvretError, match=message):
        RagResults.from_json(path)
