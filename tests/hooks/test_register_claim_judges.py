"""Hook register_claim_judges: the built-in claim judges and a plugin's side by side, the plugin's used by name (with
options) in a RAG run and by ``evret rag``; an Evret judge's name still means the lexical claim judge over it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from evret_core import EvretError, hookimpl
from evret_core.cli import main
from evret_core.plugins.loading import register_plugin
from evret_core.plugins.registry import claim_judge_names, create_claim_judge
from evret_core.rag import ClaimJudge, ClaimTask, ClaimVerdict, LexicalClaimJudge, QuestionSet, RagEvaluator

REPO = Path(__file__).resolve().parents[2]

QUESTIONS = QuestionSet.from_records(
    [{"id": "q1", "question": "What do bees make?", "answers": ["wax"], "gold_doc_ids": ["d1"]},
     {"id": "q2", "question": "What do wasps make?", "answers": ["paper"], "gold_doc_ids": ["d2"]}],
    corpus={"d1": {"text": "Bees make wax."}, "d2": {"text": "Wasps make paper."}},
)


class Doubter(ClaimJudge):
    """Says every claim is unsupported, or supported by every context when ``trusting``."""

    name = "doubter"

    def __init__(self, trusting: bool = False) -> None:
        self.trusting = trusting

    def judge_claims(self, tasks: Sequence[ClaimTask]) -> list[list[ClaimVerdict]]:
        return [[ClaimVerdict(claim=c.text, citations=list(c.citations),
                              verdict="supported" if self.trusting and t.contexts else "unsupported",
                              supporting=[x.doc_id for x in t.contexts] if self.trusting else [])
                 for c in t.claims] for t in tasks]

    def config(self) -> dict[str, object]:
        return {"name": self.name, "trusting": self.trusting}


class Plugin:
    @hookimpl
    def register_claim_judges(self, register):  # type: ignore[no-untyped-def]
        register("doubter", Doubter)


def test_register_claim_judges() -> None:
    register_plugin(Plugin(), name="p")
    assert set(claim_judge_names()) == {"doubter", "lexical", "llm"}
    assert isinstance(create_claim_judge("doubter", trusting=True), Doubter)
    doubted = RagEvaluator(claim_judge="doubter", conditions=["gold"], n_resamples=10).evaluate(QUESTIONS)
    assert doubted.generation["gold"]["groundedness"] == 0.0
    trusted = RagEvaluator(claim_judge="doubter", claim_judge_options={"trusting": True}, conditions=["gold"],
                           n_resamples=10).evaluate(QUESTIONS)
    assert trusted.generation["gold"]["groundedness"] == 1.0
    assert trusted.config["claim_judge"] == {"name": "doubter", "trusting": True}


def test_a_judge_name_is_the_lexical_claim_judge_over_it_as_before() -> None:
    default = RagEvaluator(conditions=["gold"], n_resamples=10)
    assert isinstance(default.claim_judge, LexicalClaimJudge)
    assert default.config()["claim_judge"]["judge"]["name"] == "token-overlap"
    exact = RagEvaluator(claim_judge="exact", conditions=["gold"], n_resamples=10)
    assert isinstance(exact.claim_judge, LexicalClaimJudge)
    assert exact.config()["claim_judge"] == {"name": "lexical", "judge": exact.claim_judge.judge.config()}
    by_name = RagEvaluator(claim_judge="lexical", claim_judge_options={"judge": "exact"}, conditions=["gold"],
                           n_resamples=10)
    assert by_name.config()["claim_judge"] == exact.config()["claim_judge"]


def test_unknown_claim_judge_names_the_claim_judges_and_the_judges() -> None:
    with pytest.raises(EvretError) as caught:
        RagEvaluator(claim_judge="no-such-judge", conditions=["gold"])
    message = str(caught.value)
    assert "unknown claim judge 'no-such-judge'" in message
    assert "known claim judges: lexical, llm" in message and "token-overlap" in message


def test_evret_rag_takes_a_plugin_claim_judge(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("evret_bm25", reason="the example uses evret-bm25")
    register_plugin(Plugin(), name="p")
    out = tmp_path / "rag.json"
    assert main(["rag", "--config", str(REPO / "examples" / "rag" / "rag.toml"), "--claim-judge", "doubter",
                 "--claim-judge-option", "trusting=true", "--output", str(out)]) == 0
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["config"]["claim_judge"] == {"name": "doubter", "trusting": True}
    capsys.readouterr()
    assert main(["rag", "--config", str(REPO / "examples" / "rag" / "rag.toml"), "--claim-judge", "nope",
                 "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert "unknown claim judge 'nope'" in err and len(err.strip().splitlines()) == 1
