"""The conversation JSONL reader and writer: fields and spellings, tag inheritance, default turn ids, history-only
turns, qrels kept apart, the corpus check, the round trip and every error at file:line turns[i]."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from evret_core.contracts.errors import EvretError
from evret_core.io.conversations import ConversationSet
from evret_core.io.dataset_files import BEHAVIOURS, example_from_record, read_beir_qrels

LAW: dict[str, Any] = {
    "conversation_id": "law-17", "tags": {"domain": "govt"}, "metadata": {"source": "chat log 4"},
    "turns": [
        {"user": "Can I use the court's law library to prepare my appeal?",
         "agent": "Yes. The library has self-help guides.",
         "relevant_doc_ids": {"lib-12": 2, "appeal-3": 1}, "tags": {"question_type": "factoid"}},
        {"question": "Who pays for it if I win?", "assistant": "The losing party, usually.",
         "rewrite": "Who pays the costs of an appeal if I win it?",
         "answers": [["the losing party", "the other party"], "the state"], "gold_doc_ids": ["costs-4"],
         "tags": {"answerability": "answerable", "domain": "courts"}, "metadata": {"author": "human"}},
        {"user": "And if it's the other one?", "expected_behavior": "clarify"},
        {"user": "Thanks!"},
    ]}
TOWER = {"id": 7, "turns": [{"query": "How tall is it?", "turn_id": 70, "relevant_doc_ids": ["t1"]}]}


def write(tmp_path: Path, *records: Any, name: str = "conversations.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records), encoding="utf-8")
    return path


def test_fields_spellings_tag_inheritance_and_default_turn_ids(tmp_path: Path) -> None:
    dataset = ConversationSet.from_jsonl(write(tmp_path, LAW, TOWER))
    law, tower = dataset.conversations
    first, second, third, fourth = law.turns
    assert [t.turn_id for t in law.turns] == ["law-17:1", "law-17:2", "law-17:3", "law-17:4"]
    assert [t.index for t in law.turns] == [1, 2, 3, 4]
    assert (tower.conversation_id, tower.turns[0].turn_id, tower.turns[0].user) == ("7", "70", "How tall is it?")
    assert first.tags == {"domain": "govt", "question_type": "factoid"}
    assert second.tags == {"domain": "courts", "answerability": "answerable"}  # the turn's own tag wins
    assert third.tags == fourth.tags == {"domain": "govt"} and law.tags == {"domain": "govt"}
    assert first.relevance == {"lib-12": 2.0, "appeal-3": 1.0} and second.relevant_doc_ids == ("costs-4",)
    assert (second.user, second.agent, second.rewrite) == ("Who pays for it if I win?", "The losing party, usually.",
                                                           "Who pays the costs of an appeal if I win it?")
    assert second.expected_answers == ("the losing party", "the state")
    assert second.answer_aliases == (("the losing party", "the other party"), ("the state",))
    assert third.expected_behaviour == "clarify" and not third.is_labelled
    assert second.metadata == {"author": "human"} and law.metadata == {"source": "chat log 4"}
    assert law.history(3) == law.history(3, "all") and len(law.history(3)) == 4
    assert dataset.name == "conversations" and dataset.corpus is None and dataset.warnings == ()


def test_history_only_turns_are_kept_and_counted(tmp_path: Path) -> None:
    dataset = ConversationSet.from_jsonl(write(tmp_path, LAW, TOWER))
    assert dataset.turn_count() == 5
    assert [t.turn_id for _, t in dataset.labelled_turns()] == ["law-17:1", "law-17:2", "70"]
    # the clarify turn is labelled for generation: only "Thanks!" carries no label at all
    assert dataset.notes == ("1 of 5 turns carry no labels: kept as history, not scored",)


def test_round_trip_and_content_hash(tmp_path: Path) -> None:
    dataset = ConversationSet.from_jsonl(write(tmp_path, LAW, TOWER))
    out = tmp_path / "out.jsonl"
    dataset.to_jsonl(out)
    again = ConversationSet.from_jsonl(out)
    assert again.conversations == dataset.conversations and again.notes == dataset.notes
    assert again.content_hash() == dataset.content_hash()
    written = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert written[0]["turns"][0]["tags"] == {"question_type": "factoid"}  # inherited tags are not repeated
    assert written[0]["turns"][1]["expected_answers"] == [["the losing party", "the other party"], "the state"]
    other = {**LAW, "turns": [*LAW["turns"][:3], {"user": "Thanks a lot!"}]}
    assert ConversationSet.from_jsonl(write(tmp_path, other, TOWER, name="b.jsonl")).content_hash() != \
        dataset.content_hash()


def test_clarify_is_a_behaviour_of_single_questions_too(tmp_path: Path) -> None:
    assert "clarify" in BEHAVIOURS
    assert example_from_record({"query": "which one?", "expected_behaviour": "clarify"}, "x:1") is None


def test_qrels_beside_the_file_beir_or_trec(tmp_path: Path) -> None:
    unlabelled = {"conversation_id": "c9", "turns": [{"user": "first"}, {"user": "second"}, {"user": "third"}]}
    path = write(tmp_path, unlabelled)
    beir = tmp_path / "qrels.tsv"
    beir.write_text("query-id\tcorpus-id\tscore\nc9:2\td1\t1\nc9:2\td2\t2\nc9:3\td3\t1\n", encoding="utf-8")
    trec = tmp_path / "qrels.txt"
    trec.write_text("c9:2 0 d1 1\nc9:2 0 d2 2\nc9:3 0 d3 1\n", encoding="utf-8")
    for qrels in (beir, trec):
        dataset = ConversationSet.from_jsonl(path, qrels=qrels)
        turns = dataset.conversations[0].turns
        assert [t.relevance for t in turns] == [{}, {"d1": 1.0, "d2": 2.0}, {"d3": 1.0}]
        assert dataset.notes == ("1 of 3 turns carry no labels: kept as history, not scored",)
    assert read_beir_qrels(beir) == {"c9:2": {"d1": 1.0, "d2": 2.0}, "c9:3": {"d3": 1.0}}
    stray = tmp_path / "stray.tsv"
    stray.write_text("c9:2\td1\t1\nc9:4\td1\t1\n", encoding="utf-8")
    with pytest.raises(EvretError, match=rf"^{re.escape(str(tmp_path))}/stray.tsv:2: query 'c9:4' is not a turn of "
                                         r"conversations.jsonl$"):
        ConversationSet.from_jsonl(path, qrels=stray)
    both = write(tmp_path, {"conversation_id": "c9",
                            "turns": [{"user": "a"}, {"user": "b", "relevant_doc_ids": ["x"]}, {"user": "c"}]},
                 name="both.jsonl")
    with pytest.raises(EvretError, match=rf"^{re.escape(str(tmp_path))}/both.jsonl:1: turns\[1\]: relevant_doc_ids given "
                                         rf"here and in {re.escape(str(beir))}: keep one$"):
        ConversationSet.from_jsonl(both, qrels=beir)
    bad = tmp_path / "bad.tsv"
    bad.write_text("query-id\tcorpus-id\tscore\nc9:2\td1\tone\n", encoding="utf-8")
    with pytest.raises(EvretError, match=r"bad.tsv:2: score 'one' is not a number"):
        ConversationSet.from_jsonl(path, qrels=bad)


def test_ids_missing_from_the_corpus_give_one_warning(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"_id": "lib-12", "text": "the library"}\n{"_id": "t1", "text": "330 metres"}\n',
                      encoding="utf-8")
    dataset = ConversationSet.from_jsonl(write(tmp_path, LAW, TOWER), corpus=corpus)
    assert dataset.text_of("t1") == "330 metres"
    assert dataset.warnings == (f"2 relevant id(s) of the turns are not in the corpus (first: 'appeal-3' at "
                                f"{tmp_path}/conversations.jsonl:1 turns[0]); those turns can never retrieve them",)


def turn(**fields: Any) -> dict[str, Any]:
    return {"conversation_id": "law-17", "turns": [{"user": "first"}, {"user": "second"}, fields]}


@pytest.mark.parametrize(("records", "message"), [
    (['["law-17"]'], "conversations.jsonl:1: expected a JSON object, got list"),
    ([{"turns": [{"user": "q"}]}], "conversations.jsonl:1: field 'conversation_id' is missing"),
    ([{"conversation_id": "c", "turns": []}], "conversations.jsonl:1: field 'turns' must be a non-empty list of turns"),
    ([{"conversation_id": "c", "turns": "q"}], "conversations.jsonl:1: field 'turns' must be a non-empty list of turns"),
    ([{"conversation_id": "c", "turn": [{"user": "q"}]}],
     "conversations.jsonl:1: unknown field 'turn' (did you mean turns?); known fields are"),
    ([{"conversation_id": True, "turns": [{"user": "q"}]}],
     "conversations.jsonl:1: field 'conversation_id' must be a string or an integer, got true"),
    ([turn(user="  ")], "conversations.jsonl:1: turns[2]: field 'user' is missing or not a non-empty string"),
    ([turn(agent="a")], "conversations.jsonl:1: turns[2]: field 'user' is missing or not a non-empty string"),
    ([turn(query=3)], "conversations.jsonl:1: turns[2]: field 'query' is missing or not a non-empty string"),
    ([turn(usr="q")], "conversations.jsonl:1: turns[2]: unknown field 'usr' (did you mean user?)"),
    ([turn(user="q", question="q")],
     "conversations.jsonl:1: turns[2]: fields 'user' and 'question' are two spellings of one field"),
    ([turn(user="q", expected_behaviour="ask")],
     "conversations.jsonl:1: turns[2]: field 'expected_behaviour' must be answer, refuse, escalate or clarify, got "
     "'ask'"),
    (['{"conversation_id": "c", "turns": [{"user": "q", "relevant_doc_ids": {"d1": NaN}}]}'],
     "conversations.jsonl:1: turns[0]: relevant_doc_ids: grade of 'd1' is nan; grades must be finite numbers"),
    ([turn(user="q", relevant_doc_ids=[])],
     "conversations.jsonl:1: turns[2]: field 'relevant_doc_ids' is empty; leave it out for a turn kept as history"),
    ([turn(user="q", expected_answers=[""])], "conversations.jsonl:1: turns[2]: record: expected answer 1 is empty"),
    ([turn(user="q", rewrite="")], "conversations.jsonl:1: turns[2]: field 'rewrite' must be a non-empty string"),
    ([turn(user="q", tags=["a"])], "conversations.jsonl:1: turns[2]: field 'tags' must be an object of tag names"),
    ([{"conversation_id": "law-17", "turns": [{"user": "q", "relevant_doc_ids": ["d"]}]},
      {"conversation_id": "law-17", "turns": [{"user": "q"}]}],
     "conversations.jsonl:2: duplicate conversation_id 'law-17' (first at {dir}/conversations.jsonl:1)"),
    ([{"conversation_id": "law-17", "turns": [{"user": "q", "relevant_doc_ids": ["d"]}, {"user": "r"}]},
      {"conversation_id": "c2", "turns": [{"user": "q"}, {"user": "r"}, {"user": "s"}, {"user": "t",
                                                                                    "turn_id": "law-17:2"}]}],
     "conversations.jsonl:2: turns[3]: duplicate turn_id 'law-17:2' (first at {dir}/conversations.jsonl:1 turns[1])"),
    ([{"conversation_id": "c", "turns": [{"user": "q"}, {"user": "r"}]}],
     "conversations.jsonl: no conversation has a labelled turn"),
    (["", "  "], "conversations.jsonl: the file has no conversations"),
])
def test_every_error_names_the_file_line_and_turn(tmp_path: Path, records: list[Any], message: str) -> None:
    path = write(tmp_path, *records)
    with pytest.raises(EvretError) as error:
        ConversationSet.from_jsonl(path)
    assert str(error.value).startswith(f"{tmp_path}/" + message.format(dir=tmp_path)), str(error.value)
