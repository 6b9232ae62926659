"""The ``embedding`` and ``cross-encoder`` rerankers pass Evret's reranker conformance suite: ``embedding`` on the
packaged model (loaded once for the session by the ``loaded_judge`` fixture), ``cross-encoder`` on a tiny BERT
cross-encoder built here offline (a small config and a tokenizer over a small vocabulary, saved with
``save_pretrained``: no download). Also: the embedding reranker's scores are the model's cosines and its
embeddings go through the judges' cache; the cross-encoder's are the model's raw logits; bad models are clear
errors."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from evret_sentence_transformers import EmbeddingReranker, SemanticJudge

from evret_core.contracts.errors import EvretError
from evret_core.contracts.retrieve import RetrievalResult
from evret_core.plugins.registry import create_reranker
from evret_core.testing import RerankerConformance
from evret_core.testing.reranker_suite import CANDIDATES, first_stage


def tiny_cross_encoder(folder: Path, num_labels: int = 1) -> Path:
    """A randomly initialised two-layer BERT sequence classifier with a word-level vocabulary of the suite's
    texts, saved as a model folder."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    words = sorted({w for query, pairs in CANDIDATES.items() for text in (query, *(t for _, t in pairs))
                    for w in re.findall(r"[a-z0-9]+", text.lower())})
    folder.mkdir(parents=True)
    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n", encoding="utf-8")
    tokenizer = BertTokenizerFast(vocab_file=str(vocab), do_lower_case=True)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(words) + 5, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128, num_labels=num_labels,
                        initializer_range=0.2)
    BertForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def cross_encoder_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_cross_encoder(tmp_path_factory.mktemp("models") / "tiny-cross-encoder")


class TestEmbeddingReranker(RerankerConformance):
    @pytest.fixture
    def reranker(self, loaded_judge: SemanticJudge) -> Any:
        return create_reranker("embedding", device="cpu")


class TestCrossEncoderReranker(RerankerConformance):
    @pytest.fixture
    def reranker(self, cross_encoder_folder: Path) -> Any:
        return create_reranker("cross-encoder", model=str(cross_encoder_folder), device="cpu")


def test_the_embedding_reranker_ranks_by_cosine_and_puts_the_relevant_first(loaded_judge: SemanticJudge) -> None:
    reranker = create_reranker("embedding", device="cpu")
    query, pairs = "what do bees make", CANDIDATES["what do bees make"]
    ranked = reranker.rerank(query, first_stage(pairs), 5)
    assert {r.doc_id for r in ranked[:2]} == {"d2", "d4"}, "the two texts about bees first"
    model = loaded_judge.encoder.model
    vectors = model.encode([query, *(t for _, t in pairs)], normalize_embeddings=True, convert_to_numpy=True)
    cosines = dict(zip((d for d, _ in pairs), (vectors[1:] @ vectors[0]).tolist(), strict=True))
    assert [r.score for r in ranked] == pytest.approx([cosines[r.doc_id] for r in ranked], abs=1e-5)


def test_the_embedding_reranker_shares_the_judges_embedding_cache(loaded_judge: SemanticJudge,
                                                                  tmp_path: Path) -> None:
    cache = tmp_path / "embeddings.sqlite"
    given = first_stage(CANDIDATES["why does honey not spoil"])
    first = EmbeddingReranker(device="cpu", cache=str(cache))
    ranked = first.rerank("why does honey not spoil", given, 3)
    assert first.stats()["texts_encoded"] == 4 and first.stats()["pairs"] == 3
    again = EmbeddingReranker(device="cpu", cache=str(cache))
    assert [r.doc_id for r in again.rerank("why does honey not spoil", given, 3)] == [r.doc_id for r in ranked]
    assert again.stats()["texts_encoded"] == 0 and again.stats()["cache_hits"] == 4
    # the judge reads the same file: the candidates' embeddings are already there
    judge = SemanticJudge(device="cpu", cache=str(cache))
    assert judge.encoder.cache is not None and len(judge.encoder.cache) == 4


def test_cross_encoder_scores_are_the_models_raw_logits(cross_encoder_folder: Path) -> None:
    import torch
    from sentence_transformers import CrossEncoder

    reranker = create_reranker("cross-encoder", model=str(cross_encoder_folder), device="cpu")
    query, pairs = "how tall is the eiffel tower", CANDIDATES["how tall is the eiffel tower"]
    ranked = reranker.rerank(query, first_stage(pairs), 4)
    model = CrossEncoder(str(cross_encoder_folder), device="cpu")
    logits = model.predict([(query, t) for _, t in pairs], activation_fn=torch.nn.Identity())
    by_id = dict(zip((d for d, _ in pairs), np.asarray(logits, dtype=np.float64).tolist(), strict=True))
    assert [r.score for r in ranked] == pytest.approx([by_id[r.doc_id] for r in ranked], rel=1e-5, abs=1e-6)
    assert [r.doc_id for r in ranked] == sorted(by_id, key=lambda d: -by_id[d])
    assert reranker.stats() == {"pairs": 4}
    assert reranker.config()["model"] == str(cross_encoder_folder) and reranker.config()["device"] == "cpu"


def test_cross_encoder_models_that_cannot_rerank_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(EvretError, match="option 'model' is missing"):
        create_reranker("cross-encoder")
    with pytest.raises(EvretError, match="is no folder"):
        create_reranker("cross-encoder", model=str(tmp_path / "absent"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(EvretError, match="holds no sentence-transformers model"):
        create_reranker("cross-encoder", model=str(tmp_path / "empty"))
    two = tiny_cross_encoder(tmp_path / "two-labels", num_labels=2)
    reranker = create_reranker("cross-encoder", model=str(two), device="cpu")
    with pytest.raises(EvretError, match="gives 2 scores per pair.*num_labels=1"):
        reranker.rerank("q", [RetrievalResult(doc_id="a", metadata={"text": "bees"})], 1)
    with pytest.raises(EvretError, match="'max_length' must be an integer >= 8"):
        create_reranker("cross-encoder", model=str(two), max_length=2)


def test_the_docs_eval_toml_runs_on_a_beir_folder(loaded_judge: SemanticJudge, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """docs/rerankers.md's eval.toml, its dataset pointed at a small BEIR folder: BM25's candidates reranked by the
    embedding reranker, through ``evret evaluate``."""
    import json

    from evret_core.cli import main

    docs = (Path(__file__).resolve().parents[3] / "docs" / "rerankers.md").read_text(encoding="utf-8")
    toml = re.search(r"```toml\n# eval.toml\n(.*?)```", docs, re.S)
    assert toml, "docs/rerankers.md has no eval.toml example"
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    corpus = {"b1": "Honey bees make honey from nectar.", "b2": "Honey never spoils in a sealed jar.",
              "b3": "Bees make wax for their combs.", "b4": "The stock market closed higher."}
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, "title": "", "text": t}) + "\n"
                                                 for d, t in corpus.items()), encoding="utf-8")
    (folder / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "does honey spoil"}) + "\n",
                                          encoding="utf-8")
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\tb2\t1\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EVRET_CACHE_DIR", str(tmp_path / "cache"))
    config = toml.group(1).replace('"../shared/datasets/scifact"', '"beir"')
    assert config != toml.group(1)
    Path("eval.toml").write_text(config, encoding="utf-8")
    assert main(["evaluate", "--config", "eval.toml", "--output", "reranked.json", "--no-progress"]) == 0
    assert "ndcg@10" in capsys.readouterr().out
    results = json.loads(Path("reranked.json").read_text(encoding="utf-8"))
    assert results["config"]["retriever"]["reranker"]["name"] == "embedding"
    assert results["config"]["retriever"]["depth"] == 100
    assert results["scores"]["ndcg@10"] == 1.0  # the honey-spoils abstract first
