"""The `degenerate` filter of `evret generate`: a model's looping or runaway output (the pure noise a tiny random
model writes) is dropped and counted; real questions of every shared dataset pass it."""

from __future__ import annotations

import glob
import json
from pathlib import Path

import pytest

from evret_core.testing.shared_data import shared_data
from evret_core.testsets.filters import FilterReport, apply_filters, degenerate

# what a tiny random Llama (evret_transformers.tiny) wrote for "a question the document does not answer"
NOISE = "]3Z claimb thousand onetrievi refu this queenf relevance73Z " * 12
SOURCES = {"d1": "The queen can lay up to two thousand eggs a day."}


def test_looping_or_runaway_output_is_degenerate() -> None:
    assert degenerate(NOISE)
    assert degenerate("Who is the queen the queen the queen the queen?")  # one three-word run three times
    assert degenerate(" ".join(f"w{i}" for i in range(101)))  # longer than any one question
    assert not degenerate("How many eggs can a queen lay in a day, and how many in a year?")
    assert not degenerate(" ".join(f"w{i}" for i in range(100)))


def test_the_filter_drops_and_counts_noise_of_every_type() -> None:
    records = [
        {"question_id": "u", "question": NOISE, "answers": [], "gold_doc_ids": []},
        {"question_id": "a", "question": NOISE + " eggs?", "answers": [["two thousand eggs"]], "gold_doc_ids": ["d1"]},
        {"question_id": "ok", "question": "Who wrote the first bee book?", "answers": [], "gold_doc_ids": []},
    ]
    report = FilterReport()
    kept = apply_filters(records, SOURCES, report=report)
    assert [q["question_id"] for q in kept] == ["ok"]
    assert report.dropped["degenerate"] == ["u", "a"] and report.counts()["dropped"]["degenerate"] == 2


def _questions() -> dict[str, list[str]]:
    """Single questions people wrote, from every shared dataset that has them."""
    from evret_core.rag.questions.question_sets import QuestionSet

    squad = QuestionSet.from_squad(shared_data("datasets", "squad2", "dev-v2.0-subset.json", what="SQuAD 2.0"))
    root = shared_data("datasets", what="the shared datasets")
    found = {"squad2": [q.question for q in squad.questions],
             "trec-dl-2019": [line.split("\t", 1)[1] for line in
                              (root / "trec-dl-2019" / "queries.tsv").read_text(encoding="utf-8").splitlines()],
             "scifact": [json.loads(line)["text"] for line in
                         (root / "scifact" / "queries.jsonl").read_text(encoding="utf-8").splitlines()]}
    for kind in ("rewrite", "lastturn"):  # one turn each (the *_questions files are whole conversations)
        for path in sorted(glob.glob(str(root / "mtrag" / "retrieval_tasks" / "*" / f"*_{kind}.jsonl"))):
            lines = Path(path).read_text(encoding="utf-8").splitlines()
            found.setdefault(f"mtrag {kind}", []).extend(json.loads(line)["text"] for line in lines)
    return found


def test_real_questions_are_never_degenerate() -> None:
    counts = {name: (len(texts), sum(map(degenerate, texts))) for name, texts in _questions().items()}
    assert sum(n for n, _ in counts.values()) >= 3500, counts
    assert all(dropped == 0 for _, dropped in counts.values()), counts
    print(counts)  # the figures in docs/benchmarks.md


@pytest.mark.parametrize("question", ["Who ruled the duchy of Normandy", "¿Quién gobernó Normandía?",
                                      "ノルマンディーを統治したのは誰ですか？"])
def test_short_questions_in_any_form_pass(question: str) -> None:
    assert not degenerate(question)
