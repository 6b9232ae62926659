"""evret-bm25: the retriever contract, corpus reading, options, and the demo end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from evret_bm25.retriever import BM25Retriever, load_corpus

from evret_core import EvaluationDataset, Evaluator, EvretError, QueryExample, create_retriever
from evret_core.testing import RetrieverConformance

REPO = Path(__file__).resolve().parents[3]
DOCS = [
    {"id": "d1", "title": "Honey", "text": "Honey keeps for years because of its low water content."},
    {"_id": "d2", "title": "Queens", "text": "The queen bee lays up to two thousand eggs a day."},
    {"id": "d3", "title": "Varroa", "text": "The varroa mite is the most serious pest of honeybees."},
    {"id": "d4", "title": "Wax", "text": "Young workers make wax from glands under the abdomen."},
]


@pytest.fixture
def corpus_file(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.jsonl"
    path.write_text("\n".join(json.dumps(d) for d in DOCS) + "\n", encoding="utf-8")
    return path


class TestBM25Conformance(RetrieverConformance):
    @pytest.fixture
    def retriever(self, corpus_file: Path) -> BM25Retriever:
        return create_retriever("bm25", corpus=str(corpus_file))

    @pytest.fixture
    def queries(self) -> list[str]:
        return ["how many eggs does the queen lay", "varroa mite pest", "why honey keeps", "wax glands"]


def test_finds_the_right_document_and_carries_text_and_title(corpus_file: Path) -> None:
    bm25 = create_retriever("bm25", corpus=str(corpus_file))
    top = bm25.retrieve("queen eggs", 2)[0]
    assert top.doc_id == "d2"  # read from `_id`
    assert top.text == DOCS[1]["text"] and top.metadata["title"] == "Queens"


def test_title_is_indexed_with_the_text(corpus_file: Path) -> None:
    # "varroa" is in d3's title and text, "queens" only in d2's title
    assert [r.doc_id for r in create_retriever("bm25", corpus=str(corpus_file)).retrieve("queens", 3)] == ["d2"]


def test_stemming_is_on_by_default_and_can_be_disabled(corpus_file: Path) -> None:
    stemmed = create_retriever("bm25", corpus=str(corpus_file))
    plain = create_retriever("bm25", corpus=str(corpus_file), stemmer="none")
    # "lays" -> "lay", "glands" -> "gland": only the stemmed index matches the singulars
    assert [r.doc_id for r in stemmed.retrieve("gland", 3)] == ["d4"]
    assert plain.retrieve("gland", 3) == []


def test_documents_without_a_query_term_are_not_returned(corpus_file: Path) -> None:
    bm25 = create_retriever("bm25", corpus=str(corpus_file))
    assert bm25.retrieve("photosynthesis", 3) == []
    assert bm25.batch_retrieve(["the of and", "varroa"], 10)[0] == []


def test_k_larger_than_the_corpus(corpus_file: Path) -> None:
    assert len(create_retriever("bm25", corpus=str(corpus_file)).retrieve("the queen honey wax varroa", 100)) == 4


def test_scores_follow_bm25_lucene(corpus_file: Path) -> None:
    # one-term query: idf = ln(1 + (N - df + 0.5) / (df + 0.5)), tf part = tf / (tf + k1 (1 - b + b dl/avgdl))
    import math

    bm25 = create_retriever("bm25", corpus=str(corpus_file), stemmer="none", stopwords="none", k1=1.2, b=0.75)
    docs = {d.get("id", d.get("_id")): f"{d['title']} {d['text']}" for d in DOCS}
    import re

    lengths = {k: len(re.findall(r"\b\w\w+\b", v.lower())) for k, v in docs.items()}
    avgdl = sum(lengths.values()) / len(lengths)
    idf = math.log(1 + (4 - 1 + 0.5) / (1 + 0.5))
    tf_part = 1 / (1 + 1.2 * (1 - 0.75 + 0.75 * lengths["d3"] / avgdl))
    assert bm25.retrieve("mite", 1)[0].score == pytest.approx(idf * tf_part, rel=1e-5)


def test_indexes_the_dataset_corpus_without_a_corpus_file() -> None:
    dataset = EvaluationDataset(
        queries=[QueryExample(query_id="q1", query_text="queen eggs", relevant_doc_ids=["b"])],
        corpus={"a": {"title": "", "text": "varroa mites"}, "b": {"title": "Queen", "text": "eggs every day"}},
    )
    bm25 = create_retriever("bm25", dataset=dataset)
    assert Evaluator(bm25, metrics=["mrr@10"]).evaluate(dataset).scores["mrr@10"] == 1.0


def test_no_corpus_at_all_is_a_clear_error() -> None:
    with pytest.raises(EvretError, match="option 'corpus' is missing"):
        create_retriever("bm25")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "invalid JSON"),
        ('{"text": "no id"}', "the record has no '_id', 'doc_id' or 'id' field"),
        ('{"id": "x"}', "field 'text' is missing"),
        ('{"id": "x", "text": "t", "title": 3}', "field 'title' is not a string"),
        ('["a list"]', "expected a JSON object"),
        ('{"id": "d1", "text": "dup"}', "duplicate document id 'd1'"),
    ],
)
def test_bad_corpus_lines_name_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text('{"id": "d1", "text": "fine"}\n\n' + line + "\n", encoding="utf-8")
    with pytest.raises(EvretError, match=f"{path}:3: {message}"):
        load_corpus(path)


@pytest.mark.parametrize(
    ("options", "message"),
    [({"method": "bm26"}, "method='bm26'"), ({"stemmer": "klingon"}, "stemmer='klingon'"), ({"k1": "x"}, "k1")],
)
def test_bad_options(corpus_file: Path, options: dict[str, str], message: str) -> None:
    with pytest.raises(EvretError, match=message):
        create_retriever("bm25", corpus=str(corpus_file), **options)


def test_all_methods_build(corpus_file: Path) -> None:
    for method in ("robertson", "atire", "bm25l", "bm25+", "lucene"):
        assert create_retriever("bm25", corpus=str(corpus_file), method=method).retrieve("varroa", 1)[0].doc_id == "d3"


def test_demo_config_runs_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    proc = subprocess.run(
        [sys.executable, "-m", "evret_core.cli", "evaluate", "--config", str(REPO / "examples" / "eval.toml"),
         "--output", str(out)],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "recall@5" in proc.stdout and "ndcg@10" in proc.stdout
    data = json.loads(out.read_text())
    assert data["scores"]["hit_rate@5"] >= 0.9 and len(data["per_query"]) == 22
