"""Adversarial cases on the real SQuAD 2.0 subset: the generator's invariants, reproducibility, and the scores."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evret_core.contracts.errors import EvretError
from evret_core.contracts.generation import Answer
from evret_core.rag.harness import RagEvaluator
from evret_core.rag.perturb.answer_types import check_planting
from evret_core.rag.perturb.cases import adversarial_conditions, build_cases, read_cases, write_cases
from evret_core.rag.perturb.perturbations import (
    INJECTION_TEMPLATES,
    POSITIONS,
    contains_answer,
)
from evret_core.rag.questions.question_sets import QuestionSet
from evret_core.rag.scores.adversarial_scores import outcome_scores, summarise_adversarial
from evret_core.results.rag_results import ConditionOutcome

from .conftest import squad_path

FAMILIES = ["counterfactual", "injection", "missing-gold", "irrelevant-only"]


@pytest.fixture(scope="module")
def squad() -> QuestionSet:
    return QuestionSet.from_squad(squad_path())


@pytest.fixture(scope="module")
def cases(squad: QuestionSet) -> dict:  # type: ignore[type-arg]
    return build_cases(adversarial_conditions(FAMILIES, base="gold"), squad, None, k=5, seed=7)


def test_counterfactual_changes_only_the_answer_span(squad: QuestionSet, cases: dict) -> None:  # type: ignore[type-arg]
    built = 0
    asked = {q.question_id: q.question for q in squad.questions}
    for q, case in zip(squad.questions, cases["counterfactual"], strict=True):
        if case.skip:
            continue
        built += 1
        info = case.info
        source = squad.text_of(info["source_doc"])
        forged = next(c for c in case.contexts if c.doc_id == info["forged_doc"])
        start, end = info["span"]
        planted = info["planted_answer"]
        assert forged.text == source[:start] + planted + source[end:]
        assert source[start:end] == info["original_answer"]
        assert contains_answer(source[start:end], q.answer_strings) or source[start:end] in q.answer_strings
        assert not contains_answer(planted, q.answer_strings)
        assert check_planting(info["original_answer"], planted)[0] and info["type_consistent"]
        assert check_planting(info["original_answer"], planted, q.question, asked.get(info["planted_from"]))[0]
        assert planted.lower() not in q.question.lower()
        # the real gold document is still there: the forged copy contradicts it
        assert any(c.doc_id == info["source_doc"] for c in case.contexts)
        assert case.expected_behaviour is None
    answerable = sum(q.expected_behaviour == "answer" for q in squad.questions)
    assert built >= 0.6 * answerable, (built, answerable)  # an untyped value gets no planting (issue 33)
    # unanswerable questions have no answer span to replace
    skipped = {q.question_id for q, c in zip(squad.questions, cases["counterfactual"], strict=True) if c.skip}
    assert all(q.question_id in skipped for q in squad.questions if q.expected_behaviour != "answer")


def test_missing_gold_really_removes_the_gold(squad: QuestionSet, cases: dict) -> None:  # type: ignore[type-arg]
    for q, case in zip(squad.questions, cases["missing-gold"], strict=True):
        assert not set(q.gold_doc_ids) & {c.doc_id for c in case.contexts}
        assert not any(contains_answer(c.text, q.answer_strings) for c in case.contexts if q.answer_strings)
        assert case.expected_behaviour == "refuse"
        assert len(case.contexts) >= 1  # near misses stand in: an empty context would only test refusing


def test_irrelevant_only_holds_no_gold_and_no_answer(squad: QuestionSet, cases: dict) -> None:  # type: ignore[type-arg]
    for q, case in zip(squad.questions, cases["irrelevant-only"], strict=True):
        ids = {c.doc_id for c in case.contexts}
        assert ids and not ids & set(q.gold_doc_ids)
        assert not any(contains_answer(c.text, q.answer_strings) for c in case.contexts if q.answer_strings)
        assert case.expected_behaviour == "refuse"


def test_canaries_are_unique_and_templates_and_positions_balanced(squad: QuestionSet, cases: dict) -> None:  # type: ignore[type-arg]
    infos = [c.info for c in cases["injection"]]
    canaries = [i["canary"] for i in infos]
    assert len(set(canaries)) == len(canaries) == len(squad)
    for info, case in zip(infos, cases["injection"], strict=True):
        injected = [c for c in case.contexts if c.doc_id in info["injected_docs"]]
        assert any(info["canary"] in c.text for c in injected)
        assert not any(info["canary"] in c.text for c in case.contexts if c.doc_id not in info["injected_docs"])
    templates = {t: sum(i["template"] == t for i in infos) for t in INJECTION_TEMPLATES}
    assert max(templates.values()) - min(templates.values()) <= len(POSITIONS)
    firsts = [c for c, i in zip(cases["injection"], infos, strict=True) if i["position"] == "first"]
    assert all(c.contexts[0].doc_id in i["injected_docs"] for c in firsts for i in [c.info])


def test_seeds_reproduce_and_differ(squad: QuestionSet, cases: dict) -> None:  # type: ignore[type-arg]
    again = build_cases(adversarial_conditions(FAMILIES, base="gold"), squad, None, k=5, seed=7)
    assert again == cases
    other = build_cases(adversarial_conditions(["injection", "counterfactual"], base="gold"), squad, None, k=5,
                        seed=8)
    assert [c.info["canary"] for c in other["injection"]] != [c.info["canary"] for c in cases["injection"]]


def test_cases_round_trip_through_jsonl_and_edits_are_replayed(tmp_path: Path, squad: QuestionSet,
                                                               cases: dict) -> None:  # type: ignore[type-arg]
    path = tmp_path / "cases.jsonl"
    digest = write_cases(path, squad, cases)
    conditions = read_cases(path)
    assert [c.name for c in conditions] == FAMILIES
    q = squad.questions[0]
    assert conditions[1].case(q, squad, None, 5, 0) == cases["injection"][0]
    assert conditions[1].config()["sha256"] == digest
    lines = path.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    first["contexts"] = [{"doc_id": "mine", "text": "edited by a person"}]
    lines[0] = json.dumps(first)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    edited = read_cases(path)[0].case(squad.questions[0], squad, None, 5, 0)
    assert [c.text for c in edited.contexts] == ["edited by a person"]


@pytest.mark.parametrize(("line", "message"), [
    ({"condition": "gold", "question_id": "q", "contexts": []}, "is built in"),
    ({"condition": "x", "question_id": "q", "contexts": [{"doc_id": 1, "text": "t"}]}, "'contexts' must be"),
    ({"condition": "x", "question_id": "q", "contexts": [], "expected_behaviour": "dance"}, "expected_behaviour"),
    ({"condition": "x", "question_id": "q", "contexts": [], "oops": 1}, "unknown field"),
])
def test_bad_case_files_name_the_line(tmp_path: Path, line: dict, message: str) -> None:  # type: ignore[type-arg]
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps({"condition": "x", "question_id": "p", "contexts": []}) + "\n" + json.dumps(line) + "\n")
    with pytest.raises(EvretError, match=message) as err:
        read_cases(path)
    assert f"{path}:2" in str(err.value)


def test_unknown_family_and_template_are_errors() -> None:
    with pytest.raises(EvretError, match="unknown adversarial family 'jailbreak'"):
        adversarial_conditions(["jailbreak"])
    with pytest.raises(EvretError, match="unknown injection template"):
        adversarial_conditions(["injection"], templates=["nope"])


def _outcome(info: dict, text: str = "", refused: bool = False, correct: bool | None = True) -> ConditionOutcome:  # type: ignore[type-arg]
    return ConditionOutcome(context_ids=[], expected_behaviour="answer", info=info, correct=correct,
                            answer=Answer(text=text, refused=refused))


def test_outcome_scores_by_hand() -> None:
    cf = {"family": "counterfactual", "planted_answer": "1066"}
    assert outcome_scores(_outcome(cf, "It was in 1066.", correct=False)) == {
        "adopted": 1.0, "corrected": 0.0, "flagged_conflict": 0.0, "correct": 0.0}
    assert outcome_scores(_outcome(cf, "The sources conflict: 911 or 1066."))["flagged_conflict"] == 1.0
    assert outcome_scores(_outcome(cf, "", refused=True, correct=False))["adopted"] == 0.0
    inj = {"family": "injection", "canary": "ZXABC123"}
    assert outcome_scores(_outcome(inj, "Rollo. zxabc123")) == {"leaked": 1.0, "resisted": 0.0, "correct": 1.0}
    assert outcome_scores(_outcome(inj, "Rollo.")) == {"leaked": 0.0, "resisted": 1.0, "correct": 1.0}
    assert outcome_scores(_outcome({"family": "missing-gold"}, "", refused=True)) == {"refused": 1.0, "correct": 1.0}
    assert outcome_scores(_outcome({}, "x")) == {}


def test_the_harness_scores_every_family_on_squad(squad: QuestionSet) -> None:
    conditions = ["gold", *adversarial_conditions(FAMILIES, base="gold", seed=3)]
    results = RagEvaluator(None, "extractive", conditions=conditions, n_resamples=100, seed=3).evaluate(squad)
    summary = summarise_adversarial(results, n_resamples=100, seed=3)
    assert set(summary) == set(FAMILIES)
    for family, entry in summary.items():
        assert entry["family"] == family and entry["clean"] == "gold"
        for rate, value in entry["rates"].items():
            low, high = entry["intervals"][rate]
            assert 0.0 <= low <= value <= high <= 1.0
        assert entry["drop"]["n"] > 0
        assert "tag:answerable" in entry["slices"]
    # the refusal families: "correct" means refusing
    for family in ("missing-gold", "irrelevant-only"):
        assert summary[family]["rates"]["correct"] == pytest.approx(summary[family]["rates"]["refused"])
    assert set(summary["injection"]["slices"]["template"]) == set(INJECTION_TEMPLATES)
    assert set(summary["injection"]["slices"]["position"]) == {*POSITIONS, "split"}
    assert "clean_wrong_refusal_rate" in summary["missing-gold"]


def test_cli_adversarial_run_writes_and_replays_cases(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from evret_core.cli import main
    from evret_core.rag import RagResults

    from .conftest import EXAMPLE

    cases, first, second = tmp_path / "cases.jsonl", tmp_path / "a.json", tmp_path / "b.json"
    assert main(["rag", "--config", str(EXAMPLE / "rag.toml"), "--resamples", "20", "--adversarial",
                 "injection,missing-gold,irrelevant-only", "--write-cases", str(cases), "--output", str(first)]) == 0
    printed = capsys.readouterr().out
    assert "adversarial conditions" in printed and "\n  injection " in printed
    a = RagResults.from_json(first)
    assert a.conditions == ["gold", "retrieved", "injection", "missing-gold", "irrelevant-only"]
    assert set(a.adversarial) == {"injection", "missing-gold", "irrelevant-only"}
    assert a.config["adversarial_cases"]["sha256"]
    # replay the written cases: the same contexts, so the same outcomes
    assert main(["rag", "--config", str(EXAMPLE / "rag.toml"), "--resamples", "20", "--cases", str(cases),
                 "--output", str(second)]) == 0
    b = RagResults.from_json(second)
    for qid, q in a.per_question.items():
        for name in ("injection", "missing-gold", "irrelevant-only"):
            assert b.per_question[qid].conditions[name].context_ids == q.conditions[name].context_ids
            assert b.per_question[qid].conditions[name].scores == q.conditions[name].scores
    assert main(["rag", "--config", str(EXAMPLE / "rag.toml"), "--adversarial", "jailbreak"]) == 2
    assert "unknown adversarial family 'jailbreak'" in capsys.readouterr().err
