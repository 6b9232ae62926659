"""The query forms of a turn and the history window."""

from __future__ import annotations

import pytest

from evret_core.contracts.conversation import Turn
from evret_core.contracts.errors import EvretError
from evret_core.conversation.forms import (
    HistoryWindow,
    check_forms,
    default_forms,
    form_texts,
    history_text,
    rewrite_requests,
)
from evret_core.io.conversations import Conversation, ConversationTurn

TURNS = (
    ConversationTurn("c:1", 1, "one two three", agent="four five"),
    ConversationTurn("c:2", 2, "six seven", agent="eight", relevant_doc_ids=("d1",)),
    ConversationTurn("c:3", 3, "nine ten eleven", rewrite="nine ten eleven standalone", relevant_doc_ids=("d2",)),
)
CONVERSATION = Conversation("c", TURNS)


def test_the_whole_history_of_user_messages_by_default() -> None:
    assert history_text(CONVERSATION, TURNS[2], HistoryWindow()) == "one two three\nsix seven\nnine ten eleven"
    assert history_text(CONVERSATION, TURNS[0], HistoryWindow()) == "one two three"


def test_roles_all_adds_the_agent_replies_and_turns_limits_the_window() -> None:
    assert history_text(CONVERSATION, TURNS[2], HistoryWindow(roles="all")) == \
        "one two three\nfour five\nsix seven\neight\nnine ten eleven"
    assert history_text(CONVERSATION, TURNS[2], HistoryWindow(turns=1)) == "six seven\nnine ten eleven"
    assert history_text(CONVERSATION, TURNS[2], HistoryWindow(turns=0)) == "nine ten eleven"


def test_over_the_budget_the_oldest_go_first_and_the_current_message_is_never_cut() -> None:
    # 3 words of budget left after the current message: "six seven" whole, then "three" of the oldest
    assert history_text(CONVERSATION, TURNS[2], HistoryWindow(max_words=6)) == "three\nsix seven\nnine ten eleven"
    assert history_text(CONVERSATION, TURNS[2], HistoryWindow(max_words=5)) == "six seven\nnine ten eleven"
    assert history_text(CONVERSATION, TURNS[2], HistoryWindow(max_words=2)) == "nine ten eleven"


def test_bad_windows_are_refused() -> None:
    for bad in ({"turns": -1}, {"turns": True}, {"roles": "agent"}, {"max_words": 0}):
        with pytest.raises(ValueError, match="history"):
            HistoryWindow(**bad)  # type: ignore[arg-type]


def test_form_texts_of_labelled_turns_with_missing_forms_as_none() -> None:
    texts = form_texts([CONVERSATION], ["last_turn", "full_history", "rewrite", "rewriter"], HistoryWindow(),
                       rewritten={"c:2": "six seven rewritten"})
    assert texts == {
        "last_turn": {"c:2": "six seven", "c:3": "nine ten eleven"},
        "full_history": {"c:2": "one two three\nsix seven", "c:3": "one two three\nsix seven\nnine ten eleven"},
        "rewrite": {"c:2": None, "c:3": "nine ten eleven standalone"},
        "rewriter": {"c:2": "six seven rewritten", "c:3": None},
    }
    with pytest.raises(ValueError, match=r"unknown query form 'rewite' \(did you mean rewrite\?\); use last_turn"):
        form_texts([CONVERSATION], ["rewite"], HistoryWindow())


def test_rewrite_requests_carry_every_earlier_message() -> None:
    requests = rewrite_requests([CONVERSATION])
    assert [r.turn_id for r in requests] == ["c:2", "c:3"]
    assert requests[1].history == (Turn("user", "one two three"), Turn("agent", "four five"),
                                   Turn("user", "six seven"), Turn("agent", "eight"))
    assert requests[0].conversation_id == "c" and requests[0].message == "six seven"


def test_check_forms_names_the_fix_before_any_work() -> None:
    assert check_forms(["rewrite", "last_turn"], False, 1, 3) == ["rewrite", "last_turn"]
    cases = [
        ((["rewite"], False, 1, 3),
         "unknown query form 'rewite' (did you mean rewrite?); use last_turn, full_history, rewrite or rewriter"),
        ((["last_turn", "last_turn"], False, 1, 3), "query form 'last_turn' is given twice in --forms"),
        (([], False, 1, 3), "--forms names no query form; use last_turn, full_history, rewrite or rewriter"),
        ((["last_turn", "rewriter"], False, 1, 3),
         "form 'rewriter' needs --rewriter NAME (llm, carry-terms or a plugin's)"),
        ((["last_turn", "full_history", "rewrite"], False, 0, 777),
         "form 'rewrite' needs a 'rewrite' on the turns; none of the 777 labelled turns has one: drop it from "
         "--forms or use --forms last_turn,full_history,rewriter --rewriter llm"),
        ((["rewrite"], True, 0, 2),
         "form 'rewrite' needs a 'rewrite' on the turns; none of the 2 labelled turns has one: drop it from "
         "--forms or use --forms rewriter --rewriter llm"),
    ]
    for args, message in cases:
        with pytest.raises(EvretError) as caught:
            check_forms(*args)  # type: ignore[arg-type]
        assert str(caught.value) == message


def test_default_forms_follow_the_data_and_the_rewriter() -> None:
    assert default_forms(False, 0) == ["last_turn", "full_history"]
    assert default_forms(False, 5) == ["last_turn", "full_history", "rewrite"]
    assert default_forms(True, 5) == ["last_turn", "full_history", "rewrite", "rewriter"]
