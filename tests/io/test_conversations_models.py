"""The conversation models: labels of a turn, the history before a turn, a turn as a retrieval query."""

from __future__ import annotations

import pytest

from evret_core.contracts.conversation import Turn
from evret_core.io.conversations import Conversation, ConversationSet, ConversationTurn

CONVERSATION = Conversation("law", (
    ConversationTurn("law:1", 1, "Can I use the court's library?", agent="Yes, with staff help.",
                     relevant_doc_ids={"lib-12": 2.0, "appeal-3": 1.0}),
    ConversationTurn("law:2", 2, "Who pays if I win?", rewrite="Who pays the costs of an appeal I win?",
                     expected_answers=("the losing party",), answer_aliases=(("the losing party", "the other party"),)),
    ConversationTurn("law:3", 3, "And if it's the other one?", expected_behaviour="clarify"),
), tags={"domain": "govt"})


def test_labels_of_a_turn() -> None:
    first, second, third = CONVERSATION.turns
    assert first.relevance == {"lib-12": 2.0, "appeal-3": 1.0} and first.is_id_labelled and first.is_labelled
    assert second.relevance == {} and not second.is_id_labelled and second.is_labelled
    assert not third.is_labelled
    assert ConversationTurn("x", 1, "q", relevant_doc_ids=("a", "b")).relevance == {"a": 1.0, "b": 1.0}


def test_history_before_a_turn_with_or_without_the_agent() -> None:
    assert CONVERSATION.history(1) == ()
    assert CONVERSATION.history(3) == (Turn("user", "Can I use the court's library?"),
                                       Turn("agent", "Yes, with staff help."), Turn("user", "Who pays if I win?"))
    assert CONVERSATION.history(3, roles="user") == (Turn("user", "Can I use the court's library?"),
                                                     Turn("user", "Who pays if I win?"))
    with pytest.raises(ValueError, match="roles must be 'user' or 'all'"):
        CONVERSATION.history(2, roles="agent")


def test_a_turn_as_a_query_keeps_its_labels_and_no_tags() -> None:
    first, second, _ = CONVERSATION.turns
    query = first.query("law:1#1", "library appeal")
    assert (query.query_id, query.query_text, query.relevance) == ("law:1#1", "library appeal",
                                                                   {"lib-12": 2.0, "appeal-3": 1.0})
    answered = second.query("law:2#2", second.rewrite or "")
    assert answered.expected_answers == ["the losing party"] and answered.answer_aliases == [["the losing party", "the other party"]]
    assert answered.relevant_doc_ids is None and answered.tags == {}


def test_the_set_lists_labelled_turns_in_file_order() -> None:
    other = Conversation("tower", (ConversationTurn("tower:1", 1, "How tall is it?", relevant_doc_ids=("t1",)),))
    dataset = ConversationSet((CONVERSATION, other), corpus={"t1": {"text": "330 metres", "title": ""}})
    assert [t.turn_id for _, t in dataset.labelled_turns()] == ["law:1", "law:2", "tower:1"]
    assert len(dataset) == 2 and dataset.turn_count() == 4
    assert dataset.text_of("t1") == "330 metres" and dataset.text_of("nope") is None
    assert ConversationSet((other,)).text_of("t1") is None
