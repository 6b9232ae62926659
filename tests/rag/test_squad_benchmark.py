"""The SQuAD 2.0 numbers recorded in docs/benchmarks.md, recomputed: bm25 + the extractive generator under gold and
retrieved context. Runs in CI (it fails there when ../shared is missing)."""

from __future__ import annotations

import re

import pytest

from evret_core import create_retriever
from evret_core.rag import QuestionSet, RagEvaluator, RagResults

from .conftest import REPO, squad_path

BENCHMARKS = REPO / "docs" / "benchmarks.md"


def section() -> str:
    text = BENCHMARKS.read_text(encoding="utf-8")
    start = text.index("## RAG harness on SQuAD 2.0")
    end = text.find("\n## ", start + 1)
    return text[start: end if end != -1 else len(text)]


@pytest.fixture(scope="module")
def results() -> RagResults:
    questions = QuestionSet.load(squad_path())
    retriever = create_retriever("bm25", corpus=questions.corpus)
    # 1000 resamples like the benchmark: the recorded intervals are checked too
    return RagEvaluator(retriever, "extractive", conditions=["gold", "retrieved"], k=5, n_resamples=1000,
                        seed=0).evaluate(questions)


def test_answer_table_matches_the_docs(results: RagResults) -> None:
    rows = re.findall(r"^\| (\w+) \| ([\d.]+) \(n=(\d+)\) \| ([\d.]+) \(n=(\d+)\) \|$", section(), re.MULTILINE)
    assert len(rows) == 12
    for metric, gold, gold_n, got, got_n in rows:
        for condition, recorded, n in (("gold", gold, gold_n), ("retrieved", got, got_n)):
            value = results.generation[condition][metric]
            assert value is not None
            scale = 100.0 if "." in recorded and len(recorded.split(".")[1]) == 2 else 1.0
            assert round(value * scale, len(recorded.split(".")[1])) == float(recorded), (metric, condition)
            assert results.generation_n[condition][metric] == int(n)


def test_official_style_split_is_consistent(results: RagResults) -> None:
    for condition in ("gold", "retrieved"):
        g = results.generation[condition]
        # overall = the question-weighted mean of HasAns (386) and NoAns (320), as in the official script
        assert g["exact"] == pytest.approx((386 * g["has_ans_exact"] + 320 * g["no_ans_exact"]) / 706)  # type: ignore[operator]
        assert g["f1"] == pytest.approx((386 * g["has_ans_f1"] + 320 * g["no_ans_f1"]) / 706)  # type: ignore[operator]
        assert g["no_ans_exact"] == g["correct_refusal_rate"]  # NoAns EM is the refusal rate on unanswerables


def test_retrieval_attribution_and_differences_match_the_docs(results: RagResults) -> None:
    text = section()
    for metric, recorded in re.findall(r"(recall@\d+|MRR@10|nDCG@10|context precision@5) (0\.\d{4})", text):
        name = {"MRR@10": "mrr@10", "nDCG@10": "ndcg@10", "context precision@5": "precision@5"}.get(metric, metric)
        assert round(results.retrieval[name], 4) == float(recorded), metric
    attribution = dict(re.findall(r"^\| (both_right|retrieval_failure|context_noise|generator_failure|unmeasured) "
                                  r"\| (\d+) \|$", text, re.MULTILINE))
    assert {k: int(v) for k, v in attribution.items()} == results.attribution
    assert sum(results.attribution.values()) == 706
    recorded = re.findall(r"^\| (exact|f1|correct) \| ([-+][\d.]+) \| \[([-+][\d.]+), ([-+][\d.]+)\] \|$", text,
                          re.MULTILINE)
    assert len(recorded) == 3
    for metric, mean, low, high in recorded:
        d = next(d for d in results.differences if d.metric == metric)
        assert (round(d.mean, 4), round(d.interval[0], 4), round(d.interval[1], 4)) == (
            float(mean), float(low), float(high))
