"""The extractive generator (issue 27): spans never cut a bracket or quote pair ('T(n', 'n) that solves'), and
the paraphrase mode, an offline baseline whose groundedness and citation precision are not 1.0 by construction."""

from __future__ import annotations

from evret_core.contracts.generation import Context, GenerationRequest
from evret_core.rag import QuestionSet, RagEvaluator
from evret_core.rag.generate.extractive import (
    ExtractiveGenerator,
    answer_span,
    balance_span,
    bracket_pairs,
    restate,
)
from evret_core.report.rag_tables import notes

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


def test_restate_turns_the_question_into_a_statement() -> None:
    assert restate("When were the Normans in Normandy?", "10th century") == "the Normans in Normandy: 10th century"
    assert restate("In what country is Normandy located?", "France") == "country is Normandy located: France"


def test_paraphrase_claims_restate_and_cite_the_runner_up() -> None:
    contexts = (Context("a", "The Normans were in Normandy in the 10th century."),
                Context("b", "Normandy is a region of France."))
    answer = ExtractiveGenerator(answer="paraphrase").generate(
        GenerationRequest("q1", "When were the Normans in Normandy?", contexts, "retrieved"))
    assert answer is not None and answer.text == "10th century"
    assert answer.claims[0].text == "the Normans in Normandy: 10th century"
    assert answer.claims[0].citations == ["a", "b"]


def test_paraphrase_scores_move_where_extractive_is_fixed_at_one() -> None:
    from evret_core import create_retriever

    questions = QuestionSet.from_squad(squad_path())
    retriever = create_retriever("bm25", corpus=questions.corpus)
    got = {}
    for mode in ("span", "paraphrase"):
        results = RagEvaluator(retriever, "extractive", generator_options={"answer": mode}, conditions=["retrieved"],
                               n_resamples=10).evaluate(questions)
        got[mode] = results.generation["retrieved"]
        assert ("1.000 by construction" in "\n".join(notes(results))) is (mode == "span")
    assert got["span"]["groundedness"] == got["span"]["citation_precision"] == 1.0
    assert got["paraphrase"]["groundedness"] < 1.0 and got["paraphrase"]["citation_precision"] < 0.9  # type: ignore[operator]
    assert got["paraphrase"]["has_ans_f1"] == got["span"]["has_ans_f1"]  # the same answer text
