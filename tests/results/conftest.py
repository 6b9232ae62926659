"""Real runs for the statistics and report tests: two lexical retrievers over BEIR SciFact (../shared)."""

from __future__ import annotations

import json
import math
import os
import re
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from evret_core import EvaluationDataset, Evaluator, QueryExample, RetrievalResult
from evret_core.results import EvaluationResults


def repo_root() -> Path:
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "pyproject.toml").exists() and (parent / "evret_core").is_dir():
            return parent
    raise RuntimeError("repository root not found")


def scifact_dir() -> Path:
    path = (repo_root() / ".." / "shared" / "datasets" / "scifact").resolve()
    if not (path / "corpus.jsonl").exists():
        if os.environ.get("CI"):
            pytest.fail(f"{path} is missing: CI needs the shared SciFact data")
        pytest.skip(f"{path} is missing (shared SciFact data not available outside CI)")
    return path


_TOKEN = re.compile(r"[a-z0-9]+")


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


class TfIdfRetriever:
    """A small TF-IDF retriever (inverted index), enough to give two genuinely different real runs."""

    def __init__(self, docs: dict[str, str], texts: dict[str, str], name: str) -> None:
        self.name = name
        self.texts = texts
        self.postings: dict[str, list[tuple[str, float]]] = defaultdict(list)
        df: Counter[str] = Counter()
        counts = {doc: Counter(tokens(text)) for doc, text in docs.items()}
        for c in counts.values():
            df.update(c.keys())
        n = len(docs)
        self.idf = {t: math.log((n + 1) / (f + 0.5)) for t, f in df.items()}
        for doc, c in counts.items():
            norm = math.sqrt(sum((1 + math.log(v)) ** 2 * self.idf[t] ** 2 for t, v in c.items())) or 1.0
            for t, v in c.items():
                self.postings[t].append((doc, (1 + math.log(v)) * self.idf[t] / norm))

    def retrieve(self, query: str, k: int) -> list[RetrievalResult]:
        scores: dict[str, float] = defaultdict(float)
        for t in set(tokens(query)):
            for doc, w in self.postings.get(t, ()):
                scores[doc] += w * self.idf[t]
        best = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:k]
        return [RetrievalResult(doc_id=d, score=s, metadata={"text": self.texts[d]}) for d, s in best]

    def batch_retrieve(self, queries: list[str], k: int) -> list[list[RetrievalResult]]:
        return [self.retrieve(q, k) for q in queries]

    def config(self) -> dict[str, object]:
        return {"name": self.name, "model": f"tfidf-{self.name}"}


def _tags(text: str) -> dict[str, str]:
    words = len(tokens(text))
    tags = {"length": "short" if words <= 10 else "long"}
    if re.search(r"\d", text):
        tags["numbers"] = "yes"
    return tags


@pytest.fixture(scope="session")
def scifact() -> dict[str, object]:
    root = scifact_dir()
    corpus = [json.loads(line) for line in (root / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    qrels: dict[str, list[str]] = defaultdict(list)
    for line in (root / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        qid, doc, grade = line.split("\t")
        if int(grade) > 0:
            qrels[qid].append(doc)
    queries = {}
    for line in (root / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record["_id"] in qrels:
            queries[record["_id"]] = record["text"]
    texts = {d["_id"]: f"{d['title']}. {d['text']}" for d in corpus}
    titles = {d["_id"]: d["title"] for d in corpus}
    return {"queries": queries, "qrels": qrels, "texts": texts, "titles": titles}


@pytest.fixture(scope="session")
def id_dataset(scifact: dict[str, object]) -> EvaluationDataset:
    queries: dict[str, str] = scifact["queries"]  # type: ignore[assignment]
    qrels: dict[str, list[str]] = scifact["qrels"]  # type: ignore[assignment]
    return EvaluationDataset(name="scifact-test", queries=[
        QueryExample(query_id=qid, query_text=text, relevant_doc_ids=qrels[qid], tags=_tags(text))
        for qid, text in queries.items()
    ])


@pytest.fixture(scope="session")
def retrievers(scifact: dict[str, object]) -> dict[str, TfIdfRetriever]:
    texts: dict[str, str] = scifact["texts"]  # type: ignore[assignment]
    titles: dict[str, str] = scifact["titles"]  # type: ignore[assignment]
    return {"titles": TfIdfRetriever(titles, texts, "titles"), "full": TfIdfRetriever(texts, texts, "full")}


@pytest.fixture(scope="session")
def id_runs(id_dataset: EvaluationDataset, retrievers: dict[str, TfIdfRetriever]) -> dict[str, EvaluationResults]:
    metrics = ["ndcg@10", "recall@10", "mrr@10"]
    return {name: Evaluator(r, metrics, seed=0, min_slice_size=40).evaluate(id_dataset)
            for name, r in retrievers.items()}


@pytest.fixture(scope="session")
def text_dataset(scifact: dict[str, object]) -> EvaluationDataset:
    """Text-labelled: each query's expected answers are its relevant abstracts' titles (60 queries)."""
    queries: dict[str, str] = scifact["queries"]  # type: ignore[assignment]
    qrels: dict[str, list[str]] = scifact["qrels"]  # type: ignore[assignment]
    titles: dict[str, str] = scifact["titles"]  # type: ignore[assignment]
    chosen = list(queries)[:60]
    return EvaluationDataset(name="scifact-text", queries=[
        QueryExample(query_id=qid, query_text=queries[qid], expected_answers=[titles[d] for d in qrels[qid]],
                     tags=_tags(queries[qid]))
        for qid in chosen
    ])


@pytest.fixture(scope="session")
def run_files(id_runs: dict[str, EvaluationResults], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("runs")
    paths = {}
    for name, results in id_runs.items():
        paths[name] = folder / f"{name}.json"
        results.to_json(paths[name])
    return paths
