"""The semantic judge on short answers: windows, verbatim matches without an encode, one encode per window."""

from __future__ import annotations

import pytest
from evret_sentence_transformers import SemanticJudge
from evret_sentence_transformers.windows import SENTENCE_WORDS, sentences, text_windows

from evret_core import JudgmentContext

PASSAGE = ("The Normans were the people who in the 10th and 11th centuries gave their name to Normandy, a region "
           "in France. They were descended from Norse raiders and pirates from Denmark, Iceland and Norway.")


def ctx(expected: str, retrieved: str, aliases: tuple[str, ...] = ()) -> JudgmentContext:
    return JudgmentContext(query="q", expected_text=expected, retrieved_text=retrieved, aliases=aliases)


def test_sentences() -> None:
    assert sentences(PASSAGE) == [
        "The Normans were the people who in the 10th and 11th centuries gave their name to Normandy, a region in "
        "France.",
        "They were descended from Norse raiders and pirates from Denmark, Iceland and Norway.",
    ]
    assert sentences("no end here") == ["no end here"]
    assert sentences('He said "Go." Then   left! Why? 1832 was') == ['He said "Go."', "Then left!", "Why?", "1832 was"]
    assert sentences("pH 7.4 is e.g. neutral") == ["pH 7.4 is e.g. neutral"]  # no space, or no capital after


def test_windows_are_sized_to_the_answer() -> None:
    text = "one two three four five. Six seven"
    assert text_windows(text, 1) == ("one", "two", "three", "four", "five.", "Six", "seven")
    # 2 words, step 1; each sentence on its own; the last window flush with the sentence end
    assert text_windows(text, 2) == ("one two", "two three", "three four", "four five.", "Six seven")
    # 3 words, step 2: starts 0, 2 in a 5-word sentence; a 2-word sentence is one window
    assert text_windows(text, 3) == ("one two three", "three four five.", "Six seven")
    assert text_windows(text, 4) == (text,)  # half the text or more: the text
    # sentence-sized answers: runs of whole sentences at least as long as the answer, one from each sentence
    first, second = "A0 " + " ".join(f"a{i}" for i in range(11)) + ".", "B0 b1 b2 b3 b4."
    rest = "C0 c1 c2 c3 c4 c5. " + " ".join(["pad"] * 30)
    long_text = f"{first} {second} {rest}"
    assert text_windows(long_text, SENTENCE_WORDS) == (first, f"{second} {rest}", rest)
    assert text_windows(long_text, 20) == (long_text, f"{second} {rest}", rest)
    assert text_windows("   ", 3) == ()


def test_a_verbatim_answer_matches_without_an_encode(loaded_judge: SemanticJudge, count_encodes: object) -> None:
    judge = SemanticJudge()
    contexts = [ctx("1832.", "...in 1832, at age 23"), ctx("tenth century", PASSAGE, aliases=("10th and 11th",))]
    assert judge.batch_score(contexts) == [1.0, 1.0]
    assert judge.batch_judge(contexts) == [True, True]
    assert count_encodes.texts == []  # type: ignore[attr-defined]
    assert judge.stats()["verbatim_matches"] == 4 and judge.stats()["texts_encoded"] == 0


def test_short_answers_are_compared_with_windows_not_the_passage(loaded_judge: SemanticJudge) -> None:
    # not verbatim (a plural and a possessive), but close to a window of the passage's own size
    near = [ctx("Norse raider", PASSAGE), ctx("Normandy's region in France", PASSAGE)]
    windowed = SemanticJudge().similarities(near)
    whole = SemanticJudge(windows=False).similarities(near)
    assert all(w > p + 0.2 for w, p in zip(windowed, whole, strict=True)), (windowed, whole)
    assert all(w > 0.85 for w in windowed) and all(p < 0.6 for p in whole)
    assert SemanticJudge(threshold=0.85).batch_judge(near) == [True, True]
    # the default threshold (chosen on SQuAD, where near misses are wrong answers as often as right ones) is stricter
    assert SemanticJudge().batch_judge(near) == [False, False]
    # answers that are not in the passage stay far below
    far = SemanticJudge().similarities([ctx("Spanish sailors", PASSAGE), ctx("1832", PASSAGE)])
    assert all(f < 0.6 for f in far), far


def test_windows_are_encoded_once(loaded_judge: SemanticJudge, count_encodes: object) -> None:
    judge = SemanticJudge(prefilter=False)  # every window (the prefilter's own test: test_prefilter.py)
    # two two-word answers against the same passage share its two-word windows; the verbatim one needs none
    contexts = [ctx("Viking raiders", PASSAGE), ctx("Danish pirates", PASSAGE), ctx("Norse raiders", PASSAGE),
                ctx("Viking raiders", PASSAGE)]
    judge.prepare(contexts)
    judge.batch_judge(contexts[:2])
    judge.batch_judge(contexts[2:])
    expected = {"Viking raiders", "Danish pirates", *text_windows(PASSAGE, 2)}
    assert sorted(count_encodes.texts) == sorted(expected)  # type: ignore[attr-defined]
    assert judge.texts_to_encode(contexts) == list(dict.fromkeys(
        ["Viking raiders", *text_windows(PASSAGE, 2), "Danish pirates"]))


@pytest.mark.parametrize("threshold", [0.0, 1.0])
def test_threshold_bounds_are_accepted(threshold: float) -> None:
    assert SemanticJudge(threshold=threshold).threshold == threshold
