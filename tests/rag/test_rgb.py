"""RGB-shaped counterfactual-robustness sets (issue 27): the import, and the counterfactual family planting each
question's own fake answer and fact-altered passages; end to end through `evret rag --dataset-format rgb`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from evret_core.cli import main
from evret_core.contracts.errors import EvretError
from evret_core.contracts.generation import Context
from evret_core.rag import QuestionSet, RagResults
from evret_core.rag.perturb.counterfactual import Counterfactual
from evret_core.rag.questions.rgb import read_rgb

RECORDS = [
    {"id": 0, "query": "Who won the women's singles Wimbledon in 2019?", "answer": "Simona Halep",
     "fakeanswer": "Angelique Kerber",
     "positive_wrong": ["Angelique Kerber defeated Serena Williams in the 2019 Wimbledon final, 6-2, 6-2.",
                        "Romania's Angelique Kerber won the 2019 Wimbledon title in women's singles."],
     "positive": ["Simona Halep defeated Serena Williams in the 2019 Wimbledon final, 6-2, 6-2.",
                  "Romania's Simona Halep won the 2019 Wimbledon title in women's singles."],
     "negative": ["Carlos Alcaraz defeated Novak Djokovic to win the 2023 Wimbledon men's title."]},
    {"id": 1, "query": "Who acquired Instagram?", "answer": ["Facebook", "Meta"], "fakeanswer": "Apple",
     "positive_wrong": ["Apple bought Instagram for $1 billion in 2012."],
     "positive": ["Facebook bought Instagram for $1 billion in 2012."],
     "negative": ["Instagram is a photo-sharing app launched in 2010."]},
    {"id": "int-2", "query": "Who directed Oppenheimer and when was it released?",
     "answer": [["Christopher Nolan", "Nolan"], ["July 21, 2023", "Jul 21, 2023"]],
     "positive": ["Oppenheimer, directed by Christopher Nolan, was released on July 21, 2023."],
     "negative": ["Barbie was released the same day."]},
]


@pytest.fixture()
def rgb_file(tmp_path: Path) -> Path:
    path = tmp_path / "en_fact.json"  # RGB names its JSON-lines files .json
    path.write_text("".join(json.dumps(r) + "\n" for r in RECORDS), encoding="utf-8")
    return path


def test_import_maps_every_field(rgb_file: Path) -> None:
    qs = read_rgb(rgb_file)
    first, second, third = qs.questions
    assert first.question_id == "0" and first.answers == [["Simona Halep"]]
    assert first.gold_doc_ids == ["0-pos-0", "0-pos-1"] and "0-neg-0" in qs.corpus
    assert first.counterfactual_answers == ["Angelique Kerber"]
    assert first.counterfactual_passages == RECORDS[0]["positive_wrong"]
    assert second.answers == [["Facebook", "Meta"]]  # a list of strings: one answer's aliases
    assert third.answers == [["Christopher Nolan", "Nolan"], ["July 21, 2023", "Jul 21, 2023"]]
    assert third.counterfactual_answers == [] and third.tags == {"subset": "plain"}
    assert len(qs.corpus) == 2 + 1 + 1 + 1 + 1 + 1


@pytest.mark.parametrize(("record", "message"), [
    ({"id": 9, "query": "q?", "answer": "a", "positives": []}, "unknown field(s) positives"),
    ({"id": 9, "answer": "a"}, "field 'query' is missing"),
    ({"id": 9, "query": "q?", "answer": {"text": "a"}}, "field 'answer' must be"),
    ({"id": 9, "query": "q?", "answer": "a", "positive_wrong": "x", "fakeanswer": 3}, "field 'fakeanswer'"),
])
def test_bad_records_name_the_line(tmp_path: Path, record: dict, message: str) -> None:  # type: ignore[type-arg]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(RECORDS[1]) + "\n" + json.dumps(record) + "\n", encoding="utf-8")
    with pytest.raises(EvretError, match=f"bad.json:2: .*{re.escape(message)}"):
        read_rgb(path)


def test_counterfactual_plants_the_questions_own_passages(rgb_file: Path) -> None:
    qs = read_rgb(rgb_file)
    q = qs.questions[0]
    base = [Context(d, qs.text_of(d) or "") for d in q.gold_doc_ids]
    case = Counterfactual()(q, base, qs, np.random.default_rng(0))
    assert case.skip is None and case.info["planted_answer"] == "Angelique Kerber"
    assert case.info["planted_from"] == "question" and case.info["type_consistent"] is True  # name -> name
    planted = [c.text for c in case.contexts if c.doc_id in case.info["forged_docs"]]
    assert planted == RECORDS[0]["positive_wrong"]
    assert [c.doc_id for c in case.contexts if c.doc_id not in case.info["forged_docs"]] == q.gold_doc_ids
    # a question with no counterfactual of its own: the family plants one of its own making, or skips
    own = Counterfactual()(qs.questions[2], [Context("int-2-pos-0", qs.text_of("int-2-pos-0") or "")], qs,
                           np.random.default_rng(0))
    assert own.skip or own.info["planted_from"] != "question"


def test_own_fake_answer_without_passages_replaces_the_span(tmp_path: Path) -> None:
    corpus = {"d1": {"title": "", "text": "Facebook bought Instagram in 2012."}}
    qs = QuestionSet.from_records([{"question": "Who acquired Instagram?", "answers": ["Facebook"],
                                    "gold_doc_ids": ["d1"], "counterfactual_answers": ["Apple"]}], corpus)
    case = Counterfactual()(qs.questions[0], [Context("d1", corpus["d1"]["text"])], qs, np.random.default_rng(1))
    forged = next(c for c in case.contexts if c.doc_id == case.info["forged_doc"])
    assert forged.text == "Apple bought Instagram in 2012." and case.info["planted_from"] == "question"


def test_cli_runs_an_rgb_file_and_scores_adoption(tmp_path: Path, rgb_file: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    answers = tmp_path / "answers.jsonl"
    lines = [{"question_id": "0", "condition": "gold", "text": "Simona Halep"},
             {"question_id": "0", "condition": "counterfactual", "text": "Angelique Kerber"},  # adopts the fake
             {"question_id": "1", "condition": "gold", "text": "Facebook"},
             {"question_id": "1", "condition": "counterfactual", "text": "Facebook, not Apple."},  # corrects it
             {"question_id": "int-2", "text": "Christopher Nolan"}]
    answers.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    out = tmp_path / "rgb.json"
    assert main(["rag", "--dataset", str(rgb_file), "--dataset-format", "rgb", "--conditions", "gold",
                 "--generator", str(answers), "--adversarial", "counterfactual", "--resamples", "20",
                 "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "counterfactual" in printed
    results = RagResults.from_json(out)
    cf = {qid: q.conditions["counterfactual"] for qid, q in results.per_question.items()}
    assert cf["0"].info["planted_from"] == "question" and cf["1"].info["planted_answer"] == "Apple"
    rates = results.adversarial["counterfactual"]["rates"]
    assert rates["adopted"] == pytest.approx(1 / 3) and rates["corrected"] == pytest.approx(1 / 3)
    assert main(["rag", "--dataset", str(rgb_file), "--dataset-format", "rgb", "--corpus", str(rgb_file),
                 "--conditions", "gold", "--generator", "extractive"]) == 2
    assert "drop --corpus" in capsys.readouterr().err


# -- issue 33 (redteam F12): ids that are not numbers, fake answers that are the answer, edited inputs ----------------
@pytest.mark.parametrize(("id_text", "shown"), [("NaN", "NaN"), ("1e400", "Infinity"), ("-1e400", "-Infinity"),
                                                ("Infinity", "Infinity")])
def test_non_finite_ids_are_refused_at_their_line(tmp_path: Path, id_text: str, shown: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """RGB05 / RGB05b: NaN and 1e400 became the question ids 'nan' and 'inf'."""
    path = tmp_path / "ids.jsonl"
    bad = json.dumps({"id": 0, "query": "q2?", "answer": "b", "positive": ["b is here"]}).replace("0", id_text, 1)
    path.write_text(json.dumps(RECORDS[1]) + "\n" + bad + "\n", encoding="utf-8")
    with pytest.raises(EvretError, match=rf"ids.jsonl:2: field 'id' is {shown}; give a string or a finite number"):
        read_rgb(path)
    assert main(["rag", "--dataset", str(path), "--dataset-format", "rgb", "--conditions", "gold",
                 "--generator", "extractive"]) == 2
    assert f"ids.jsonl:2: field 'id' is {shown}" in capsys.readouterr().err


def test_a_fake_answer_equal_to_the_answer_is_left_out_of_counterfactual_with_a_warning(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """RGB11: such a record was planted as is, its adoption and its right answer one and the same thing."""
    same = {"id": 2, "query": "Who won the 2023 Boston marathon?", "answer": "Evans Chebet",
            "positive": ["Evans Chebet won the 2023 Boston marathon."], "fakeanswer": "evans  chebet.",
            "positive_wrong": ["Eliud Kipchoge won the 2023 Boston marathon."]}
    path = tmp_path / "rgb11.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (RECORDS[0], same, {**same, "id": 3}, RECORDS[1])),
                    encoding="utf-8")
    out = tmp_path / "out.json"
    assert main(["rag", "--dataset", str(path), "--dataset-format", "rgb", "--conditions", "gold",
                 "--generator", "extractive", "--adversarial", "counterfactual", "--resamples", "20",
                 "--output", str(out)]) == 0
    err = capsys.readouterr().err
    assert (f"WARNING: 2 record(s) give a fake answer equal to one of their answers (first at {path}:2): the "
            f"counterfactual condition leaves them out") in err
    results = RagResults.from_json(out)
    cf = {qid: q.conditions["counterfactual"] for qid, q in results.per_question.items()}
    assert cf["2"].skipped is not None and "fake answer" in cf["2"].skipped and cf["2"].answer is None
    assert cf["0"].skipped is None and cf["1"].skipped is None
    assert results.adversarial["counterfactual"]["n"] == 2


def _edited(path: Path, old: str, new: str, tmp_path: Path) -> Path:
    edited = tmp_path / f"edited-{path.name}"
    text = path.read_text(encoding="utf-8")
    assert old in text
    edited.write_text(text.replace(old, new), encoding="utf-8")
    return edited


def test_report_refuses_a_question_set_or_corpus_edited_since_the_run(
        tmp_path: Path, rgb_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """RGB27 / RGB27b: the drill-down showed an edited passage as the context the run saw."""
    from .conftest import REPO

    run = tmp_path / "rgb.json"
    assert main(["rag", "--dataset", str(rgb_file), "--dataset-format", "rgb", "--conditions", "gold",
                 "--generator", "extractive", "--resamples", "20", "--output", str(run)]) == 0
    recorded = json.loads(run.read_text())["config"]["question_set"]
    assert set(recorded) >= {"questions_sha256", "corpus_sha256"}
    page = tmp_path / "page.html"
    assert main(["report", str(run), "--format", "html", "--dataset", str(rgb_file), "--dataset-format", "rgb",
                 "--output", str(page)]) == 0
    assert "Simona Halep defeated Serena Williams" in page.read_text()
    capsys.readouterr()
    edited = _edited(rgb_file, "Simona Halep defeated", "Somebody else entirely defeated", tmp_path)
    assert main(["report", str(run), "--format", "html", "--dataset", str(edited), "--dataset-format", "rgb",
                 "--output", str(tmp_path / "edited.html")]) == 2
    err = capsys.readouterr().err
    assert f"--dataset {edited}: its passages (the corpus) differ from those run 'rgb' used" in err
    assert not (tmp_path / "edited.html").exists()
    # a question edited (the passages kept) is the question set's difference
    asked = _edited(rgb_file, "Who acquired Instagram?", "Who bought Instagram?", tmp_path)
    assert main(["report", str(run), "--format", "html", "--dataset", str(asked), "--dataset-format", "rgb"]) == 2
    assert f"--dataset {asked}: its questions differ from those run 'rgb' used" in capsys.readouterr().err

    # a corpus .jsonl edited since the run (RGB27b)
    base = tmp_path / "base.json"
    example = REPO / "examples" / "rag"
    assert main(["rag", "--config", str(example / "rag.toml"), "--resamples", "20", "--output", str(base)]) == 0
    corpus = _edited(example / "corpus.jsonl", "The library", "EDITED: the library never opens. The library",
                     tmp_path)
    capsys.readouterr()
    assert main(["report", str(base), "--format", "html", "--dataset", str(example / "questions.jsonl"),
                 "--corpus", str(corpus), "--output", str(tmp_path / "b.html")]) == 2
    assert f"--corpus {corpus}: its documents differ from those run 'base' used" in capsys.readouterr().err
    assert main(["report", str(base), "--format", "html", "--dataset", str(example / "questions.jsonl"),
                 "--corpus", str(example / "corpus.jsonl"), "--output", str(tmp_path / "b.html")]) == 0

    # an older results file, without the hashes, still loads: the texts cannot be checked, and it says so
    old = json.loads(run.read_text())
    del old["config"]["question_set"]
    (tmp_path / "old.json").write_text(json.dumps(old))
    capsys.readouterr()
    assert main(["report", str(tmp_path / "old.json"), "--format", "html", "--dataset", str(edited),
                 "--dataset-format", "rgb", "--output", str(tmp_path / "old.html")]) == 0
    assert ("WARNING: run 'old' records no hashes of its question set and corpus (written by an earlier Evret): "
            "the drill-down's context texts cannot be checked against what the run saw") in capsys.readouterr().err


def test_a_jsonl_question_set_s_own_fake_answer_equal_to_its_answer_is_warned_and_left_out(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    rows = [{"id": "a", "question": "Who acquired Instagram?", "answers": ["Facebook", "Meta"],
             "counterfactual_answers": ["META"], "counterfactual_passages": ["Meta bought Instagram."]},
            {"id": "b", "question": "Who acquired WhatsApp?", "answers": ["Facebook"],
             "counterfactual_answers": ["Apple"], "counterfactual_passages": ["Apple bought WhatsApp."]}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    questions = QuestionSet.from_jsonl(path)
    assert questions.warnings == [f"1 record(s) give a fake answer equal to one of their answers (first at {path}:1): "
                                  f"the counterfactual condition leaves them out (adopting the fake answer could not "
                                  f"be told from answering right)"]
    first, second = questions.questions
    assert first.fake_answer_is_an_answer and not second.fake_answer_is_an_answer
    case = Counterfactual()(first, [], questions, np.random.default_rng(0))
    assert case.skip is not None and "one of its answers" in case.skip
    assert Counterfactual()(second, [], questions, np.random.default_rng(0)).skip is None
