"""Real evaluations of the bundled honeybee example with two retrievers of different quality (no plugin needed)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from evret_core import EvaluationDataset, Evaluator, RetrievalResult
from evret_core.results.evaluation import EvaluationResults

REPO = Path(__file__).resolve().parents[2]
DATASET = REPO / "examples" / "dataset.jsonl"
CORPUS = REPO / "examples" / "corpus.jsonl"
METRICS = ["recall@5", "mrr@10", "hit_rate@1"]


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def load_corpus() -> list[dict[str, str]]:
    return [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]


class OverlapRetriever:
    """Ranks documents by the words they share with the query; ``damage`` swaps the top results away."""

    def __init__(self, damage: int = 0) -> None:
        self.docs = load_corpus()
        self.damage = damage

    def __call__(self, query: str, k: int) -> list[RetrievalResult]:
        words = _words(query)
        ranked = sorted(self.docs, key=lambda d: (-len(words & _words(d["title"] + " " + d["text"])), d["id"]))
        if self.damage:
            ranked = ranked[self.damage :] + ranked[: self.damage]
        return [RetrievalResult(doc_id=d["id"], score=float(len(ranked) - i), metadata={"text": d["text"]})
                for i, d in enumerate(ranked[:k])]


def evaluate(damage: int = 0) -> EvaluationResults:
    return Evaluator(OverlapRetriever(damage), metrics=METRICS, judge="token-overlap").evaluate(
        EvaluationDataset.from_jsonl(DATASET))


@pytest.fixture(scope="session")
def good_results() -> EvaluationResults:
    return evaluate(0)


@pytest.fixture(scope="session")
def bad_results() -> EvaluationResults:
    return evaluate(3)
