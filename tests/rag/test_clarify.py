"""The ``clarify`` behaviour end to end through ``evret rag``: a question set may expect it, an answers file may say
``"clarified": true``, a clarifying answer is scored as the behaviour it is (no claims, not an answer), and
``clarify_rate`` / ``wrong_clarify_rate`` are one number in the terminal, the results JSON and the HTML report,
checked when the file is read back."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from evret_core import EvretError
from evret_core.cli import main
from evret_core.rag import RagResults
from evret_core.rag.scores.answers import behaviour_of, behaviour_ok
from evret_core.statistics.inference import format_interval

CORPUS = [{"id": "a", "text": "The city museum opens at 9 am every day."},
          {"id": "b", "text": "The harbour museum opens at 11 am on weekdays."},
          {"id": "c", "text": "Parking at the station costs 3 euros per hour."}]
QUESTIONS = [
    {"id": "q1", "question": "When does the city museum open?", "answers": ["9 am"], "gold_doc_ids": ["a"]},
    {"id": "q2", "question": "When does the museum open?", "expected_behaviour": "clarify"},
    {"id": "q3", "question": "How much is parking at the station?", "answers": ["3 euros per hour"],
     "gold_doc_ids": ["c"]},
    {"id": "q4", "question": "Who painted the ceiling?", "expected_behaviour": "refuse"},
]
ANSWERS = [
    {"question_id": "q1", "text": "9 am", "claims": [{"text": "The city museum opens at 9 am.", "citations": ["a"]}]},
    {"question_id": "q2", "text": "Which museum do you mean, the city museum or the harbour museum?",
     "clarified": True},
    {"question_id": "q3", "text": "Do you mean the station or the town centre?", "clarified": True},
    {"question_id": "q4", "text": "I cannot tell.", "refused": True},
]


def write_jsonl(path: Path, records: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def rag_args(tmp_path: Path, answers: list[dict[str, object]] = ANSWERS) -> list[str]:
    return ["rag", "--dataset", str(write_jsonl(tmp_path / "q.jsonl", QUESTIONS)),
            "--corpus", str(write_jsonl(tmp_path / "corpus.jsonl", CORPUS)), "--retriever", "bm25", "-k", "2",
            "--generator", str(write_jsonl(tmp_path / "answers.jsonl", answers)), "--resamples", "200"]


def test_behaviour_of_and_behaviour_ok() -> None:
    # clarify beats escalate beats refuse beats answer
    assert behaviour_of(True, True, True) == "clarify"
    assert [behaviour_of(True, True), behaviour_of(True, False), behaviour_of(False, False)] == [
        "escalate", "refuse", "answer"]
    assert behaviour_ok("clarify", False, False, True)
    assert not behaviour_ok("clarify", True, False) and not behaviour_ok("clarify", False, False)
    assert not behaviour_ok("answer", False, False, True) and not behaviour_ok("refuse", False, False, True)
    assert not behaviour_ok("escalate", False, True, True)  # it asked back: not an escalation


def test_clarify_is_scored_and_one_number_everywhere(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run.json"
    assert main([*rag_args(tmp_path), "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    results = RagResults.from_json(out)
    for condition in ("gold", "retrieved"):
        means, counts = results.generation[condition], results.generation_n[condition]
        # q2 asked back as expected; q3, a question to answer, asked back too
        assert (means["clarify_rate"], counts["clarify_rate"]) == (1.0, 1)
        assert (means["wrong_clarify_rate"], counts["wrong_clarify_rate"]) == (0.5, 2)
        assert (means["wrong_refusal_rate"], means["correct_refusal_rate"]) == (0.0, 1.0)
        q2 = results.per_question["q2"].conditions[condition]
        assert q2.answer is not None and q2.answer.clarified and q2.claims == []  # its question is not a claim
        assert {k: q2.scores[k] for k in ("refused", "behaviour_ok", "correct")} == {
            "refused": 0.0, "behaviour_ok": 1.0, "correct": 1.0}
        assert q2.scores["groundedness"] is None and q2.scores.get("answer_relevance") is None
        q3 = results.per_question["q3"].conditions[condition]
        assert {k: q3.scores[k] for k in ("exact", "f1", "behaviour_ok", "correct", "refused")} == {
            "exact": 0.0, "f1": 0.0, "behaviour_ok": 0.0, "correct": 0.0, "refused": 0.0}
    # the terminal prints the JSON's numbers
    assert "2 of 4 questions, the 2 to refuse, escalate or clarify have no gold" in printed
    lines = printed.splitlines()
    for condition in ("gold", "retrieved"):
        start = lines.index(f"  [{condition}]")
        rows = {}
        for line in lines[start + 1:]:
            if not line.startswith("  ") or line.startswith("  ["):
                break
            rows[line.split()[0]] = line.split(maxsplit=1)[1].strip()
        for rate in ("clarify_rate", "wrong_clarify_rate"):
            value = results.generation[condition][rate]
            interval = results.generation_intervals[condition][rate]
            assert rows[rate] == f"{format_interval(value, interval)}  (n={results.generation_n[condition][rate]})"
    # so does the HTML report, with the verdict of the clarifying answers
    page = tmp_path / "run.html"
    assert main(["report", str(out), "--format", "html", "--output", str(page)]) == 0
    html = page.read_text(encoding="utf-8")
    for condition in ("gold", "retrieved"):
        for rate in ("clarify_rate", "wrong_clarify_rate"):
            value = results.generation[condition][rate]
            assert format_interval(value, results.generation_intervals[condition][rate]) in html
    assert "clarify_rate" in html and "asked back: Which museum do you mean" in html


def test_a_run_that_never_asks_back_has_no_clarify_rates(tmp_path: Path) -> None:
    answers = [a if a["question_id"] != "q3" else {"question_id": "q3", "text": "3 euros per hour"}
               for a in ANSWERS if a["question_id"] != "q2"]
    questions = [q for q in QUESTIONS if q["id"] != "q2"]
    out = tmp_path / "run.json"
    args = rag_args(tmp_path, answers)
    write_jsonl(tmp_path / "q.jsonl", questions)
    args[args.index("--dataset") + 1] = str(write_jsonl(tmp_path / "q2.jsonl", questions))
    assert main([*args, "--output", str(out)]) == 0
    results = RagResults.from_json(out)
    assert not {"clarify_rate", "wrong_clarify_rate"} & set(results.generation["gold"])


@pytest.mark.parametrize(("rate", "value"), [("clarify_rate", 0.5), ("wrong_clarify_rate", 1.0)])
def test_a_clarify_rate_that_is_not_the_answers_is_refused_when_read(tmp_path: Path, rate: str, value: float) -> None:
    out = tmp_path / "run.json"
    assert main([*rag_args(tmp_path), "--output", str(out)]) == 0
    data = json.loads(out.read_text(encoding="utf-8"))
    data["generation"]["gold"][rate] = value
    out.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(EvretError, match=f"generation.gold.{rate}"):
        RagResults.from_json(out)


@pytest.mark.parametrize(("answer", "message"), [
    ({"question_id": "q2", "text": "Which one?", "clarified": True, "claims": ["The museum opens."]},
     "answers.jsonl:2: a clarified answer makes no claims, but this one has 1"),
    ({"question_id": "q2", "text": "Which one?", "clarified": True, "refused": True},
     "answers.jsonl:2: an answer is either 'clarified' .* or 'refused', not both"),
    ({"question_id": "q2", "clarified": True, "escalated": True},
     "answers.jsonl:2: an answer is either 'clarified' .* or 'escalated', not both"),
])
def test_an_inconsistent_clarifying_answer_is_refused_at_its_line(tmp_path: Path, answer: dict[str, object],
                                                                  message: str,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    answers = [ANSWERS[0], answer]
    assert main(rag_args(tmp_path, answers)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and re.search(message, err[0]), err
