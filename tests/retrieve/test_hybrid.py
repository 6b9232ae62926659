"""The ``hybrid`` retriever: options checked before any retriever is built, nested retriever tables in an
``evret evaluate`` TOML file, and rankings equal to fusing its retrievers' own runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evret_core.contracts.errors import EvretError
from evret_core.contracts.retrieve import RankedColumns
from evret_core.evaluation.config import EvaluateConfig
from evret_core.plugins.registry import create_retriever
from evret_core.retrieve.fusion import FusionSettings, fuse_columns, fuse_runs

pytest.importorskip("bm25s")

CORPUS = {
    "rag": {"title": "RAG", "text": "Retrieval augmented generation grounds answers in retrieved documents."},
    "vec": {"title": "Vectors", "text": "Vector databases index embeddings for nearest neighbour search."},
    "bm25": {"title": "BM25", "text": "BM25 ranks documents by term frequency and document length."},
    "faiss": {"title": "FAISS", "text": "FAISS searches dense vectors fast on one machine."},
    "dpr": {"title": "DPR", "text": "Dense passage retrieval encodes questions and passages as vectors."},
}
QUERIES = ["retrieval of documents for generation", "dense vectors search", "term frequency ranking"]
MISSING = "/nonexistent/run.jsonl"


def two_bm25(**fusion: Any) -> Any:
    return create_retriever("hybrid", retrievers=[
        {"name": "bm25", "options": {"corpus": CORPUS}},
        {"name": "bm25", "options": {"corpus": CORPUS, "k1": 2.0, "b": 1.0, "stemmer": None}}], **fusion)


@pytest.mark.parametrize(("fusion", "message"), [
    ({"method": "borda"}, "option method='borda' is not a fusion method"),
    ({"norm": "l2"}, "option norm='l2' is not a normalisation"),
    ({"rrf_k": -5}, "option rrf_k must be a number >= 0"),
    ({"depth": 0}, "option depth must be an integer from 1"),
    ({"method": "wsum", "weights": [1, 2, 3]}, "option weights has 3 values for 2 retrievers"),
])
def test_fusion_options_fail_before_any_retriever_is_built(fusion: dict[str, Any], message: str) -> None:
    """Both retrievers would fail to build (their run files do not exist): the fusion option fails first."""
    parts = [{"name": "run", "options": {"path": MISSING}}, {"name": "run", "options": {"path": MISSING}}]
    with pytest.raises(EvretError, match=message) as caught:
        create_retriever("hybrid", retrievers=parts, **fusion)
    assert "retriever 'hybrid'" in str(caught.value) and MISSING not in str(caught.value)


@pytest.mark.parametrize(("retrievers", "message"), [
    ("bm25", "option retrievers must be a list of tables"),
    ([{"name": "bm25"}], "option retrievers needs at least two retrievers, got 1"),
    ([{"name": "run", "options": {"path": MISSING}}, {"name": "bm25x"}], "unknown retriever 'bm25x'"),
    ([{"name": "run", "options": {"path": MISSING}}, {"name": "bm25", "options": {"k2": 1}}],
     r"option 'k2' \(from hybrid retrievers\[1\] options\) is not an option"),
    ([{"name": "run", "options": {"path": MISSING}}, {"name": "bm25", "k1": 1}],
     r"option retrievers\[1\] has 'k1': a retriever table takes name and options"),
    ([{"name": "run", "options": {"path": MISSING}}, {"options": {}}], r"option retrievers\[1\] needs a name"),
    ([{"name": "run", "options": {"path": MISSING}}, {"name": "hybrid"}], "a hybrid inside a hybrid"),
])
def test_each_retriever_table_is_checked_before_the_first_is_built(retrievers: Any, message: str) -> None:
    with pytest.raises(EvretError, match=message) as caught:
        create_retriever("hybrid", retrievers=retrievers)
    assert MISSING not in str(caught.value)


@pytest.mark.parametrize("fusion", [{"method": "rrf"}, {"method": "mnz", "norm": "zmuv"},
                                    {"method": "wsum", "norm": "min-max", "weights": [0.2, 0.8]}])
def test_rankings_are_the_fusion_of_each_retrievers_top_depth(fusion: dict[str, Any]) -> None:
    """Each retriever's list in its own order (ties as it ranked them), its top ``depth``; the fused list cut to k."""
    hybrid = two_bm25(depth=5, **fusion)
    settings = FusionSettings.check(fusion["method"], fusion.get("norm", "min-max"), fusion.get("weights"),
                                    n_runs=2)
    runs = [[RankedColumns.from_results(results) for results in part.batch_retrieve(QUERIES, 5)]
            for part in hybrid.retrievers]
    want = fuse_columns(runs, settings)
    for columns, (ids, scores) in zip(hybrid.batch_retrieve_columns(QUERIES, 3), want, strict=True):
        assert list(columns.ids) == list(ids[:3])
        assert list(columns.scores) == list(scores[:3])
        assert list(columns.texts) == [CORPUS[d]["text"] for d in columns.ids]


def test_a_run_file_and_its_fusion_agree() -> None:
    """Without ties, fusing score dicts (fuse_runs) gives the hybrid's ranking."""
    hybrid = two_bm25(depth=5)
    runs = [{q: {r.doc_id: r.score for r in results} for q, results in zip(QUERIES, part.batch_retrieve(QUERIES, 5),
                                                                             strict=True)}
            for part in hybrid.retrievers]
    untied = [q for q in QUERIES if all(len(set(run[q].values())) == len(run[q]) for run in runs)]
    assert untied
    want = fuse_runs(runs)
    for query in untied:
        assert [r.doc_id for r in hybrid.retrieve(query, 5)] == list(want[query])[:5]


def test_evaluate_toml_with_nested_retriever_tables(tmp_path: Path) -> None:
    """``[[retriever.retrievers]]`` tables with their own options, a corpus path relative to the file."""
    (tmp_path / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": d, **r}) + "\n" for d, r in CORPUS.items()), encoding="utf-8")
    (tmp_path / "data.jsonl").write_text(
        json.dumps({"query_id": "q1", "query": QUERIES[1], "relevant_doc_ids": ["faiss"]}) + "\n", encoding="utf-8")
    toml = tmp_path / "eval.toml"
    toml.write_text(
        'dataset = "data.jsonl"\nmetrics = ["mrr@3"]\n'
        '[retriever]\nname = "hybrid"\nmethod = "rrf"\nrrf_k = 10\ndepth = 4\n'
        '[[retriever.retrievers]]\nname = "bm25"\noptions = { corpus = "corpus.jsonl" }\n'
        '[[retriever.retrievers]]\nname = "bm25"\noptions = { corpus = "corpus.jsonl", k1 = 2.0, stemmer = "none" }\n',
        encoding="utf-8")
    results = EvaluateConfig.from_toml(toml).evaluate()
    same = create_retriever("hybrid", rrf_k=10, depth=4, retrievers=[
        {"name": "bm25", "options": {"corpus": CORPUS}},
        {"name": "bm25", "options": {"corpus": CORPUS, "k1": 2.0, "stemmer": "none"}}])
    ranked = [r.doc_id for r in same.retrieve(QUERIES[1], 3)]
    assert results.scores["mrr@3"] == 1 / (ranked.index("faiss") + 1)
    assert results.config["retriever"]["name"] == "hybrid"
    assert [r["name"] for r in results.config["retriever"]["retrievers"]] == ["bm25", "bm25"]
