"""Hook register_rag_scores: the built-in scores and a plugin's side by side; the plugin's score in the results,
the terminal table of ``evret rag`` and its gates; a badly behaved score is an error naming it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pytest

from evret_core import EvretError, hookimpl
from evret_core.cli import main
from evret_core.plugins.loading import register_plugin
from evret_core.plugins.registry import create_rag_score, rag_score_names
from evret_core.rag import QuestionSet, RagEvaluator, RagScore, ScoreInput

REPO = Path(__file__).resolve().parents[2]
QUESTIONS = QuestionSet.from_records(
    [{"id": "q1", "question": "What do bees make?", "answers": ["wax"], "gold_doc_ids": ["d1"]},
     {"id": "q2", "question": "What do wasps make?", "answers": ["paper"], "gold_doc_ids": ["d2"]}],
    corpus={"d1": {"text": "Bees make wax."}, "d2": {"text": "Wasps make paper."}},
)


class ContextCount(RagScore):
    """How many contexts the generator saw, and whether the answer quotes the first one."""

    name = "context-count"
    metrics = ("n_contexts", "quotes_first")

    def score(self, item: ScoreInput) -> Mapping[str, float | None]:
        first = item.contexts[0].text if item.contexts else ""
        return {"n_contexts": float(len(item.contexts)),
                "quotes_first": float(bool(first) and item.answer.text.strip() in first) if item.answer.text else None}


class Liar(RagScore):
    name = "liar"
    metrics = ("exact",)

    def score(self, item: ScoreInput) -> Mapping[str, float | None]:
        return {"exact": 1.0}


class Plugin:
    @hookimpl
    def register_rag_scores(self, register):  # type: ignore[no-untyped-def]
        register("context-count", ContextCount)


def test_register_rag_scores() -> None:
    assert rag_score_names() == ["answer-match", "answer-relevance", "behaviour", "claims", "correct"]
    before = RagEvaluator(conditions=["gold"], n_resamples=10).evaluate(QUESTIONS)
    register_plugin(Plugin(), name="p")
    assert "context-count" in rag_score_names() and isinstance(create_rag_score("context-count"), ContextCount)
    results = RagEvaluator(conditions=["gold"], n_resamples=10).evaluate(QUESTIONS)
    assert results.per_question["q1"].conditions["gold"].scores["n_contexts"] == 1.0
    assert results.generation["gold"]["n_contexts"] == 1.0 and results.generation_n["gold"]["n_contexts"] == 2
    # the built-in scores are what they were without the plugin
    assert {k: v for k, v in results.generation["gold"].items() if k in before.generation["gold"]} == \
        before.generation["gold"]


def test_a_plugin_score_is_in_evret_rag_output_json_and_gates(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("evret_bm25", reason="the example uses evret-bm25")
    register_plugin(Plugin(), name="p")
    out = tmp_path / "rag.json"
    config = str(REPO / "examples" / "rag" / "rag.toml")
    assert main(["rag", "--config", config, "--output", str(out), "--fail-under", "gold/n_contexts=0.5"]) == 0
    printed = capsys.readouterr().out
    assert any(line.split()[:1] == ["n_contexts"] for line in printed.splitlines())
    data = json.loads(out.read_text(encoding="utf-8"))
    per_question = [q["conditions"]["gold"]["scores"]["n_contexts"] for q in data["per_question"].values()]
    assert per_question == [float(len(q["conditions"]["gold"]["context_ids"])) for q in data["per_question"].values()]
    assert data["generation"]["gold"]["n_contexts"] == pytest.approx(sum(per_question) / len(per_question))
    assert main(["rag", "--config", config, "--output", str(out), "--fail-under", "gold/n_contextz=0.5"]) == 2


def test_a_score_giving_another_scores_name_is_an_error_naming_it() -> None:
    class Bad:
        @hookimpl
        def register_rag_scores(self, register):  # type: ignore[no-untyped-def]
            register("liar", Liar)

    register_plugin(Bad(), name="bad")
    with pytest.raises(EvretError, match="rag score 'liar' returned 'exact', which another score already gives"):
        RagEvaluator(conditions=["gold"], n_resamples=10).evaluate(QUESTIONS)
