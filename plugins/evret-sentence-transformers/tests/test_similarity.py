"""The semantic similarity score and the semantic-similarity output evaluator."""

from __future__ import annotations

import numpy as np
import pytest
from evret_sentence_transformers import (
    SemanticJudge,
    SemanticSimilarityEvaluator,
    semantic_similarities,
    semantic_similarity,
)

from evret_core import EvretError, create_evaluator


def test_score_is_cosine_mapped_to_0_1(loaded_judge: SemanticJudge, paraphrases: list[tuple[str, str]],
                                       unrelated: list[tuple[str, str]]) -> None:
    pairs = paraphrases + unrelated
    scores = semantic_similarities([a for a, _ in pairs], [b for _, b in pairs])
    model = loaded_judge.encoder.model
    left = model.encode([a for a, _ in pairs], normalize_embeddings=True)
    right = model.encode([b for _, b in pairs], normalize_embeddings=True)
    np.testing.assert_allclose(scores, (np.sum(left * right, axis=1) + 1) / 2, atol=1e-5)
    assert all(0.0 <= s <= 1.0 for s in scores)
    assert min(scores[: len(paraphrases)]) > 0.9 > 0.6 > max(scores[len(paraphrases):])
    assert semantic_similarity("The same sentence.", "The same sentence.") == pytest.approx(1.0, abs=1e-5)
    assert semantic_similarity(*paraphrases[0]) == pytest.approx(scores[0], abs=1e-6)


def test_lengths_must_agree() -> None:
    with pytest.raises(EvretError, match="2 texts on the left and 1"):
        semantic_similarities(["a", "b"], ["c"])
    assert semantic_similarities([], []) == []


def test_output_evaluator(loaded_judge: SemanticJudge, count_encodes: object,
                         paraphrases: list[tuple[str, str]], unrelated: list[tuple[str, str]]) -> None:
    evaluator = create_evaluator("semantic-similarity")
    assert isinstance(evaluator, SemanticSimilarityEvaluator)
    assert evaluator.needs_target
    records = [{"input": f"question {i}", "output": out, "target": target}
               for i, (target, out) in enumerate(paraphrases + unrelated)]
    # the same output against the same target again, and a list of targets where the second is the match
    records.append({"input": "again", "output": paraphrases[0][1], "target": paraphrases[0][0]})
    records.append({"input": "several", "output": paraphrases[1][1],
                    "target": [unrelated[2][1], paraphrases[1][0]]})
    results = evaluator.evaluate(records)
    distinct = {t for a, b in paraphrases + unrelated for t in (a, b)}
    assert sorted(count_encodes.texts) == sorted(distinct)  # type: ignore[attr-defined]
    assert results.evaluator == "semantic-similarity"
    assert len(results.scores) == len(records)
    expected = semantic_similarities([r["output"] for r in records[:-1]], [r["target"] for r in records[:-1]])
    np.testing.assert_allclose(results.scores[:-1], expected, atol=1e-6)  # type: ignore[arg-type]
    assert results.scores[-1] == pytest.approx(expected[1], abs=1e-6)
    assert results.details[-1]["target"] == paraphrases[1][0]
    assert results.mean == pytest.approx(float(np.mean(results.scores)))  # type: ignore[arg-type]
    assert results.stats["texts_encoded"] == len(distinct) == results.stats["distinct_texts"]


def test_output_evaluator_needs_a_target() -> None:
    evaluator = SemanticSimilarityEvaluator()
    with pytest.raises(EvretError, match="record 2: evaluator 'semantic-similarity' needs a 'target'"):
        evaluator.evaluate([{"output": "a", "target": "b"}, {"output": "c"}])
    with pytest.raises(EvretError, match="record 1: field 'target'"):
        evaluator.evaluate([{"output": "a", "target": []}])
