"""The semantic judge on the real offline all-MiniLM-L6-v2 model."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from evret_sentence_transformers import SemanticJudge
from evret_sentence_transformers import models as st_models

from evret_core import EvaluationDataset, Evaluator, EvretError, JudgmentContext, QueryExample, create_judge
from evret_core.retrieve import embedding_models
from evret_core.testing import JudgeConformance


def ctx(expected: str, retrieved: str, query: str = "q") -> JudgmentContext:
    return JudgmentContext(query=query, expected_text=expected, retrieved_text=retrieved)


def test_default_model_resolves_to_packaged_weights_without_network(loaded_judge: SemanticJudge) -> None:
    resolved = loaded_judge.encoder.resolved
    assert resolved.local
    assert (resolved.origin, resolved.source) == ("package", str(st_models.packaged_model_path()))  # even if cached
    assert (Path(resolved.source) / "model.safetensors").is_file()


def test_model_names_resolve_as_the_cores_embedding_option_does() -> None:
    """One resolution for the judge, the retriever and the vector stores' `embedding` option: the core's, which
    this module re-exports under the names its users call."""
    from evret_core import sdk

    for name in ("resolve_model", "ResolvedModel", "packaged_model_path", "hub_reachable", "hub_endpoint"):
        assert getattr(st_models, name) is getattr(sdk, name), name
    assert st_models.DEFAULT_MODEL == sdk.PACKAGED_MODEL == "sentence-transformers/all-MiniLM-L6-v2"


def test_paraphrases_match_and_unrelated_texts_do_not(
    loaded_judge: SemanticJudge, paraphrases: list[tuple[str, str]], unrelated: list[tuple[str, str]]
) -> None:
    contexts = [ctx(a, b) for a, b in paraphrases + unrelated]
    verdicts = loaded_judge.batch_judge(contexts)
    assert verdicts == [True] * len(paraphrases) + [False] * len(unrelated)
    # the one-at-a-time path agrees with the batch path
    assert [loaded_judge.judge(c) for c in contexts] == verdicts


def test_threshold_decides_at_the_cosine(loaded_judge: SemanticJudge, paraphrases: list[tuple[str, str]]) -> None:
    context = ctx(*paraphrases[0])
    cosine = float(loaded_judge.similarities([context])[0])
    assert 0.8 < cosine < 1.0
    just_below = SemanticJudge(threshold=cosine - 1e-4)
    just_above = SemanticJudge(threshold=cosine + 1e-4)
    assert just_below.batch_judge([context]) == [True]
    assert just_above.batch_judge([context]) == [False]
    assert just_below.batch_score([context]) == pytest.approx([cosine])  # contract 2: judge == score >= threshold
    # identical texts are a verbatim match: score 1
    assert loaded_judge.similarities([ctx("same text", "same text")])[0] == 1.0


def test_similarities_equal_the_cosine_of_the_model_embeddings(
    loaded_judge: SemanticJudge, paraphrases: list[tuple[str, str]]
) -> None:
    contexts = [ctx(a, b) for a, b in paraphrases]
    model = loaded_judge.encoder.model
    left = model.encode([a for a, _ in paraphrases])
    right = model.encode([b for _, b in paraphrases])
    expected = np.sum(left * right, axis=1) / (np.linalg.norm(left, axis=1) * np.linalg.norm(right, axis=1))
    np.testing.assert_allclose(loaded_judge.similarities(contexts), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("threshold", [1.5, -0.2, float("nan"), "high"])
def test_bad_threshold_is_an_error_naming_the_option(threshold: object) -> None:
    with pytest.raises(EvretError, match="threshold"):
        SemanticJudge(threshold=threshold)  # type: ignore[arg-type]


def test_registered_as_semantic_with_options() -> None:
    judge = create_judge("semantic", threshold=0.9, batch_size=8)
    assert isinstance(judge, SemanticJudge)
    assert judge.config() == {"name": "semantic", "model": st_models.DEFAULT_MODEL, "threshold": 0.9, "windows": True,
                              "prefilter": 0.0, "prefilter_stems": 0.0, "device": "auto", "batch_size": 8,
                              "fp16": False}
    assert create_judge("semantic", windows="false").windows is False
    with pytest.raises(EvretError, match="batch_size"):
        create_judge("semantic", batch_size=0)


def test_each_distinct_text_is_encoded_once_over_an_evaluation(
    loaded_judge: SemanticJudge, count_encodes: object
) -> None:
    # Documents repeat across queries and answers repeat across queries: 6 docs + 4 answers = 10 distinct texts.
    docs = {
        "d1": "The Eiffel Tower stands in Paris, France.",
        "d2": "At sea level, water boils at 100 °C.",
        "d3": "Taking aspirin lowers heart attack risk.",
        "d4": "The stock market fell sharply on Monday.",
        "d5": "Football is popular in Brazil.",
        "d6": "Tokyo is the capital city of Japan.",
    }
    answers = [
        "The Eiffel Tower is located in Paris.",
        "Water boils at 100 degrees Celsius at sea level.",
        "Aspirin reduces the risk of heart attacks.",
        "The capital of Japan is Tokyo.",
    ]
    rankings = {
        "q1": ["d1", "d4", "d5", "d2"],
        "q2": ["d2", "d1", "d4", "d5"],
        "q3": ["d3", "d5", "d1", "d6"],
        "q4": ["d6", "d4", "d3", "d2"],
        "q5": ["d1", "d2", "d3", "d6"],
    }
    expected = {
        "q1": [answers[0]],
        "q2": [answers[1], answers[0]],
        "q3": [answers[2]],
        "q4": [answers[3], answers[2]],
        "q5": answers,
    }
    dataset = EvaluationDataset(queries=[
        QueryExample(query_id=q, query_text=f"question {q}", expected_answers=expected[q]) for q in rankings
    ])
    run = {q: [{"doc_id": d, "score": 10 - r, "text": docs[d]} for r, d in enumerate(ids)]
           for q, ids in rankings.items()}
    judge = SemanticJudge(threshold=0.75, windows=False)  # windows are counted in test_windows_are_encoded_once
    # judge_batch_size=3 makes the evaluator judge in several batch_judge calls: the memo must span them, and
    # prepare() must have encoded every distinct text in a single pass before the first call
    evaluator = Evaluator(retriever=run, metrics=["recall@4", "mrr"], judge=judge, batch_size=1, judge_batch_size=3)
    results = evaluator.evaluate(dataset)
    encoded = count_encodes.texts  # type: ignore[attr-defined]
    assert sorted(encoded) == sorted(set(docs.values()) | set(answers))
    assert results.stats["judge"]["texts_encoded"] == 10
    assert results.stats["judge"]["distinct_texts"] == 10
    assert results.stats["judge"]["encode_calls"] == 1
    # every answer sits at rank 1 for the query that asks for it first
    assert results.scores["mrr"] == pytest.approx(1.0)
    assert results.scores["recall@4"] == pytest.approx(1.0)
    # judging again encodes nothing more
    judge.batch_judge([ctx(answers[0], docs["d1"]), ctx(answers[1], docs["d5"])])
    assert len(count_encodes.texts) == 10  # type: ignore[attr-defined]


def test_persistent_cache_serves_a_rerun_without_encoding(
    tmp_path: Path, loaded_judge: SemanticJudge, count_encodes: object,
    paraphrases: list[tuple[str, str]], unrelated: list[tuple[str, str]],
) -> None:
    contexts = [ctx(a, b) for a, b in paraphrases + unrelated]
    distinct = {t for c in contexts for t in (c.expected_text, c.retrieved_text)}
    cache_file = tmp_path / "embeddings.sqlite"
    first = SemanticJudge(cache=str(cache_file), windows=False, prefilter=False)
    verdicts = first.batch_judge(contexts)
    assert first.stats()["texts_encoded"] == len(distinct)
    assert len(count_encodes.texts) == len(distinct)  # type: ignore[attr-defined]

    rerun = SemanticJudge(cache=str(cache_file), windows=False, prefilter=False)
    assert rerun.batch_judge(contexts) == verdicts
    np.testing.assert_allclose(rerun.similarities(contexts), first.similarities(contexts), atol=1e-6)
    assert rerun.stats()["texts_encoded"] == 0
    assert rerun.stats()["cache_hits"] == len(distinct)
    assert len(count_encodes.texts) == len(distinct)  # type: ignore[attr-defined]

    # a new text is the only thing encoded; the cache is keyed by model, so another threshold shares it
    third = SemanticJudge(cache=str(cache_file), threshold=0.5, windows=False)
    third.batch_judge(contexts + [ctx("A brand new expected answer.", paraphrases[0][1])])
    assert third.stats()["texts_encoded"] == 1


def test_cache_true_uses_the_evret_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            loaded_judge: SemanticJudge) -> None:
    monkeypatch.setenv("EVRET_CACHE_DIR", str(tmp_path / "cache"))
    judge = SemanticJudge(cache=True, prefilter=False)
    judge.batch_judge([ctx("alpha beta", "gamma delta")])
    assert (tmp_path / "cache" / "embeddings.sqlite").is_file()
    assert judge.encoder.cache is not None and len(judge.encoder.cache) == 2


def test_a_local_model_folder_works(loaded_judge: SemanticJudge, paraphrases: list[tuple[str, str]]) -> None:
    folder = st_models.packaged_model_path()
    assert folder is not None
    judge = SemanticJudge(model=str(folder), threshold=0.75)
    assert judge.encoder.resolved.origin == "path"
    assert judge.batch_judge([ctx(*paraphrases[0])]) == [True]


def test_unknown_model_fails_fast_with_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # An unreachable hub (a closed local port) and an empty HF cache, as on a machine without network.
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(embedding_models, "_probe_results", {})  # probe afresh: the answer is kept per process
    judge = SemanticJudge(model="no-such-org/no-such-model-evret")
    started = time.monotonic()
    with pytest.raises(EvretError, match="no-such-org/no-such-model-evret.*cannot be reached"):
        judge.batch_judge([ctx("a", "b")])
    assert time.monotonic() - started < 10


def test_missing_or_empty_model_folder_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(EvretError, match=r"^semantic judge: option 'model': '.*model' is no folder$"):
        SemanticJudge(model=str(tmp_path / "nope" / "model")).batch_judge([ctx("a", "b")])
    with pytest.raises(EvretError, match="^semantic judge: option 'model': .* holds no sentence-transformers model"):
        SemanticJudge(model=str(tmp_path)).batch_judge([ctx("a", "b")])


def test_cuda_device(loaded_judge: SemanticJudge, paraphrases: list[tuple[str, str]]) -> None:
    import torch

    judge = SemanticJudge(device="cuda")
    if torch.cuda.is_available():
        assert judge.batch_judge([ctx(*paraphrases[0])]) == [True]
        assert str(judge.encoder.model.device).startswith("cuda")
    else:
        with pytest.raises(EvretError, match="CUDA is not available"):
            judge.batch_judge([ctx(*paraphrases[0])])


def test_bad_device_is_an_error() -> None:
    with pytest.raises(EvretError, match="device 'quantum'"):
        SemanticJudge(device="quantum").batch_judge([ctx("a", "b")])


# -- the judge contract ---------------------------------------------------------------------------------------


class TestSemanticJudgeConformance(JudgeConformance):
    @pytest.fixture
    def judge(self, loaded_judge: SemanticJudge) -> SemanticJudge:
        return SemanticJudge()


def test_stats_count_per_run_and_the_memo_survives_a_reset(loaded_judge: SemanticJudge,
                                                          paraphrases: list[tuple[str, str]]) -> None:
    judge = SemanticJudge(windows=False)
    contexts = [ctx(a, b) for a, b in paraphrases]
    judge.batch_judge(contexts)
    assert judge.stats()["texts_encoded"] == judge.stats()["distinct_texts"] == 2 * len(paraphrases)
    judge.reset_stats()
    judge.batch_judge(contexts[:1])
    assert judge.stats() == {"texts_encoded": 0, "cache_hits": 0, "encode_calls": 0, "distinct_texts": 2,
                             "verbatim_matches": 0, "prefilter_skipped": 0, "prefilter_skipped_trigrams": 0,
                             "prefilter_skipped_stems": 0, "device": "cpu", "batch_size": 64, "fp16": False}
