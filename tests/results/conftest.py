"""Real runs for the statistics and report tests: two lexical retrievers over BEIR SciFact (../shared)."""

from __future__ import annotations

import json
import math
import re
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from evret_core import EvaluationDataset, Evaluator, QueryExample, RetrievalResult
from evret_core.results.evaluation import EvaluationResults
from evret_core.testing.shared_data import shared_data


def repo_root() -> Path:
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "pyproject.toml").exists() and (parent / "evret_core").is_dir():
            return parent
    raise RuntimeError("repository root not found")


def scifact_dir() -> Path:
    return shared_data("datasets", "scifact", "corpus.jsonl", what="SciFact").parent


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


# -- a large synthetic pair of runs (the size of the report is tested on it) -------------------------------------
LARGE_QUERIES = 1793
_TOPICS = [f"{place} ({aspect})" for place in (
    "Southern California", "Normans", "Rhine", "Amazon rainforest", "Victoria and Albert Museum", "Geology",
    "Ctenophora", "Huguenots", "Steam engine", "Oxygen", "European Union law", "Imperialism",
) for aspect in ("history and founding", "economy, ports and infrastructure", "culture", "climate and nature")]
_SYLLABLES = ["ka", "ro", "mi", "te", "lu", "sa", "do", "ne", "vi", "pa", "gri", "sto", "len", "mar", "tho", "quel"]


def synthetic_runs(n_queries: int = LARGE_QUERIES, k: int = 10, seed: int = 0) -> dict[str, EvaluationResults]:
    """Two runs over the same ``n_queries`` text-labelled queries, shaped like a SQuAD-style evaluation.

    A corpus of 150 passages per topic (48 topics; lengths log-normal around 650 characters, 120 to 4,000), each
    query asking about a span of one gold passage of its topic; run ``bm25`` finds the gold passage 70% of the
    time, run ``dense`` 80%, and half of dense's other documents are bm25's. Passages recur across queries of a
    topic and across runs, as in real corpora.
    """
    import random

    from evret_core.contracts.judge import Judge, JudgmentContext

    class ContainsJudge(Judge):
        name = "contains-test"

        def judge(self, context: JudgmentContext) -> bool:
            return context.expected_text.lower() in context.retrieved_text.lower()

    rng = random.Random(seed)
    words = sorted({"".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 4))) for _ in range(4000)})
    passages: dict[str, list[tuple[str, str]]] = {}
    for t, topic in enumerate(_TOPICS):
        passages[topic] = []
        for p in range(150):
            target = min(4000, max(120, int(rng.lognormvariate(math.log(650), 0.45))))
            text: list[str] = []
            while sum(len(w) + 1 for w in text) < target:
                text.append(rng.choice(words))
            passages[topic].append((f"wiki-{t:02d}-{p:04d}", " ".join(text).capitalize() + "."))
    texts = {doc: text for pool in passages.values() for doc, text in pool}
    queries, gold, topic_of = [], {}, {}
    kinds = ["what", "who", "when", "where", "how many", "why or how (an explanation)"]
    for i in range(n_queries):
        topic = _TOPICS[i % len(_TOPICS)]
        doc, text = rng.choice(passages[topic])
        tokens_ = text.rstrip(".").split()
        start = rng.randrange(max(1, len(tokens_) - 3))
        answers = [" ".join(tokens_[start:start + rng.randint(2, 4)])]
        if rng.random() < 0.3:
            answers.append(" ".join(tokens_[start:start + 1]))
        kind = rng.choice(kinds)
        question = f"{kind.split()[0]} {' '.join(rng.choice(words) for _ in range(rng.randint(6, 14)))} q{i}?"
        qid = f"5733be28{i:08x}"
        gold[question], topic_of[question] = doc, topic
        queries.append(QueryExample(query_id=qid, query_text=question, expected_answers=answers,
                                    tags={"topic": topic, "kind": kind}))
    dataset = EvaluationDataset(name="synthetic-squad-like", queries=queries)
    lists: dict[str, dict[str, list[str]]] = {"bm25": {}, "dense": {}}
    for question in gold:
        pool = [doc for doc, _ in passages[topic_of[question]] if doc != gold[question]]
        for name, hit in (("bm25", 0.7), ("dense", 0.8)):
            others = lists["bm25"][question][: k // 2] if name == "dense" else []
            others = [d for d in others if d != gold[question]]
            others += [d for d in rng.sample(pool, k) if d not in others][: k - 1 - len(others)]
            ranked = others + ([rng.choice(pool)] if rng.random() > hit else [])
            if len(ranked) < k:
                ranked.insert(min(int(rng.expovariate(0.5)), len(ranked)), gold[question])
            lists[name][question] = ranked[:k]
    runs = {}
    for name in ("bm25", "dense"):
        chosen = lists[name]

        def retrieve(query: str, depth: int, chosen: dict[str, list[str]] = chosen) -> list[dict[str, object]]:
            return [{"doc_id": d, "text": texts[d], "score": round(30.0 - 2.5 * r, 3)}
                    for r, d in enumerate(chosen[query][:depth])]

        runs[name] = Evaluator(retrieve, ["ndcg@10", "recall@10", "mrr@10"], judge=ContainsJudge(),
                               n_resamples=200, seed=0).evaluate(dataset)
    return runs


@pytest.fixture(scope="session")
def large_runs() -> dict[str, EvaluationResults]:
    return synthetic_runs()
