"""``Evaluator(judge=NAME, judge_options={...})``: a judge named in Python is built with its options by the one
component builder, like ``create_judge(NAME, **options)``; it remembers its recipe; an option the judge does not
take names where it was written ("Python", or the config file and its table) and the options the judge accepts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evret_core import EvaluationDataset, Evaluator, EvretError, QueryExample, RetrievalResult, create_judge
from evret_core.evaluation.config import EvaluateConfig
from evret_core.plugins.recipes import Recipe, recipe, recipe_of

ACCEPTED = "accepted options: min_tokens, overlap_ratio, query_boost"
OPTIONS = {"min_tokens": 1, "overlap_ratio": 0.2}
METRICS = ["recall@2", "precision@2", "mrr@2"]


def dataset() -> EvaluationDataset:
    return EvaluationDataset(queries=[QueryExample(
        query_id="q1", query_text="What is RAG?",
        expected_answers=["RAG combines retrieval with generation for better accuracy",
                          "Retrieval-augmented generation improves LLM responses"])])


def retriever(query: str, k: int) -> list[RetrievalResult]:
    texts = ["RAG is a technique that combines retrieval with generation", "generation of responses",
             "Vector databases store embeddings"]
    return [RetrievalResult(doc_id=f"d{i}", score=1.0 - i / 10, metadata={"text": t}) for i, t in enumerate(texts)][:k]


def scores(judge: Any, judge_options: dict[str, Any] | None = None) -> dict[str, float]:
    return Evaluator(retriever, metrics=METRICS, judge=judge, judge_options=judge_options).evaluate(dataset()).scores


def test_judge_options_score_like_the_judge_built_with_them() -> None:
    by_name = scores("token-overlap", OPTIONS)
    assert by_name == scores(create_judge("token-overlap", **OPTIONS))
    assert by_name != scores("token-overlap")  # the options reached the judge: the default judges otherwise
    evaluator = Evaluator(retriever, metrics=METRICS, judge="token-overlap", judge_options=OPTIONS)
    assert evaluator.judge.config() == create_judge("token-overlap", **OPTIONS).config()


def test_the_judge_remembers_its_recipe() -> None:
    judge = Evaluator(retriever, metrics=METRICS, judge="token-overlap", judge_options=OPTIONS).judge
    assert recipe(judge) == Recipe("judge", "token-overlap", OPTIONS)
    assert recipe_of("judge", judge) == Recipe("judge", "token-overlap", OPTIONS)  # what an executor ships


def test_a_bad_option_names_python_and_the_accepted_options() -> None:
    with pytest.raises(EvretError) as caught:
        Evaluator(retriever, metrics=METRICS, judge="token-overlap", judge_options={"min_tokenz": 2})
    assert str(caught.value) == (f"judge 'token-overlap': option 'min_tokenz' (from Python) is not an option of this "
                                 f"judge (did you mean min_tokens?); {ACCEPTED}")
    with pytest.raises(EvretError, match=r"overlap_ratio must be in \(0, 1\], got 2.0 \(options from Python\)$"):
        Evaluator(retriever, metrics=METRICS, judge="token-overlap", judge_options={"overlap_ratio": 2})


def test_judge_options_go_to_a_judge_given_by_name_or_the_default() -> None:
    with pytest.raises(EvretError, match="judge_options apply to a judge given by name, not to a judge object"):
        Evaluator(retriever, metrics=METRICS, judge=create_judge("exact"), judge_options={"x": 1})
    default = Evaluator(retriever, metrics=METRICS, judge_options={"remove_articles": True}).judge
    assert recipe(default) == Recipe("judge", "contains", {"remove_articles": True})
    assert Evaluator(retriever, metrics=METRICS).judge is None  # no options: the default is resolved when needed


def test_evaluate_config_from_toml_names_the_file_and_table(tmp_path: Path) -> None:
    toml = tmp_path / "eval.toml"
    toml.write_text('dataset = "data.jsonl"\nmetrics = ["recall@2"]\nretriever = "run"\n'
                    '[judge]\nname = "token-overlap"\nmin_tokenz = 2\n', encoding="utf-8")
    config = EvaluateConfig.from_toml(toml)
    with pytest.raises(EvretError) as caught:
        config.build_judge()
    assert str(caught.value) == (f"judge 'token-overlap': option 'min_tokenz' (from {toml} [judge]) is not an option "
                                 f"of this judge (did you mean min_tokens?); {ACCEPTED}")
