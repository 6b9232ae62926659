"""A generator's :class:`Answer` (a contracts dataclass) inside a RAG results file: ``ConditionOutcome.answer``
is written with the key order of Answer's fields, unicode as is and floats in full, exactly as when Answer was a
pydantic model (the string below was written by that code), reads back as equal Answer and Claim objects, and an
unknown key in the answer or in one of its claims makes the file an error, as before."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from evret_core.contracts.generation import Answer, Claim
from evret_core.results.rag_results import ConditionOutcome

ANSWER = Answer(text="Les abeilles dansent — «waggle».",
                claims=[Claim(text="Bees dance.", citations=["d1", "d2"]), Claim(text="Ünïcode 🐝")],
                escalated=True, metadata={"score": 0.1 + 0.2, "n": 3, "nested": {"x": [1.5, None]}})
# ConditionOutcome(context_ids=["d1", "d2"], expected_behaviour="answer", answer=ANSWER).model_dump_json(), written
# by the code in which Answer and Claim were pydantic models
PINNED = ('{"context_ids":["d1","d2"],"expected_behaviour":"answer","answer":{"text":"Les abeilles dansent — '
          '«waggle».","claims":[{"text":"Bees dance.","citations":["d1","d2"]},{"text":"Ünïcode 🐝","citations":[]}],'
          '"refused":false,"escalated":true,"metadata":{"score":0.30000000000000004,"n":3,"nested":{"x":[1.5,null]}}},'
          '"claims":[],"scores":{},"correct":null,"info":{},"skipped":null}')


def test_an_answer_is_written_as_the_model_wrote_it() -> None:
    outcome = ConditionOutcome(context_ids=["d1", "d2"], expected_behaviour="answer", answer=ANSWER)
    assert outcome.answer is ANSWER  # kept as given, not copied
    assert outcome.model_dump_json() == PINNED


def test_an_answer_reads_back_as_equal_dataclasses() -> None:
    outcome = ConditionOutcome.model_validate_json(PINNED)
    assert type(outcome.answer) is Answer and all(type(c) is Claim for c in outcome.answer.claims)
    assert outcome.answer == ANSWER
    assert outcome.model_dump_json() == PINNED


@pytest.mark.parametrize(("old", "new"), [
    ('"refused":false', '"refused":false,"confidence":0.5'),  # an unknown key in the answer
    ('"citations":[]}', '"citations":[],"page":3}'),  # an unknown key in a claim
    ('"text":"Bees dance."', '"text":7'),  # a claim's text that is not a string
])
def test_an_answer_that_is_not_one_is_an_error(old: str, new: str) -> None:
    assert old in PINNED
    with pytest.raises(ValidationError):
        ConditionOutcome.model_validate_json(PINNED.replace(old, new, 1))


def test_a_clarifying_answer_writes_its_flag_and_reads_back() -> None:
    """``clarified`` is written only when true: a file without it (every file written before the field) reads back
    with False and writes back byte for byte (above); one with it keeps it."""
    outcome = ConditionOutcome(context_ids=[], expected_behaviour="clarify",
                               answer=Answer(text="Which ocean do you mean?", clarified=True))
    written = outcome.model_dump_json()
    assert '"escalated":false,"clarified":true,"metadata":{}' in written
    back = ConditionOutcome.model_validate_json(written)
    assert back.answer is not None and back.answer.clarified is True
    assert back.model_dump_json() == written
    assert '"clarified"' not in ConditionOutcome(context_ids=[], expected_behaviour="answer",
                                                 answer=Answer(text="x")).model_dump_json()
