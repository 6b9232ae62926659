"""The extractive generator's spans never cut a bracket or quote pair (issue 27: 'T(n', 'n) that solves')."""

from __future__ import annotations

from evret_core.rag import QuestionSet, RagEvaluator
from evret_core.rag.extractive import answer_span, balance_span, bracket_pairs

from .conftest import squad_path


def _cut(text: str, piece: str) -> str:
    start = text.index(piece)
    left, right = balance_span(start, start + len(piece), bracket_pairs(text))
    return text[left:right]


def test_spans_grow_to_a_near_partner_and_shrink_from_a_far_one() -> None:
    text = "the worst-case time T(n) that solves it"
    assert _cut(text, "T(n") == "T(n)"
    assert _cut(text, "n) that solves") == "(n) that solves"
    far = "(" + "x" * 60 + " n) that solves"
    assert _cut(far, "n) that solves") == " that solves"
    assert _cut('he said "stop here" and left', 'said "stop') == 'said "stop here"'
    assert _cut("a [b (c] d", "b (c") == "b (c"  # an unpaired mark does not constrain the span
    assert bracket_pairs("it\u2019s (fine)") == {5: 10, 10: 5}  # the apostrophe is not a quote


def test_answer_span_keeps_brackets_whole() -> None:
    assert answer_span("Tesla (born in Smiljan) moved to Paris.", "Where was Tesla born?") == \
        "(born in Smiljan) moved to Paris"


def test_no_span_cuts_a_pair_on_squad() -> None:
    questions = QuestionSet.from_squad(squad_path())
    results = RagEvaluator(None, "extractive", conditions=["gold"], n_resamples=10).evaluate(questions)
    spans = [q.conditions["gold"].answer.text for q in results.per_question.values()  # type: ignore[union-attr]
             if not q.conditions["gold"].answer.refused]  # type: ignore[union-attr]
    assert len(spans) > 300
    for span in spans:
        assert span.count("(") == span.count(")") and span.count('"') % 2 == 0, span
