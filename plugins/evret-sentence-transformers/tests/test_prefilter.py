"""The lexical prefilter (issue 26, part 3) and the encoding progress (issue 24, problem 2), on the real model."""

from __future__ import annotations

import pytest
from evret_sentence_transformers import SemanticJudge
from evret_sentence_transformers.prefilter import MIN_COVER, cover, kept_windows, trigrams
from evret_sentence_transformers.windows import text_windows

from evret_core import EvaluationDataset, Evaluator, EvretError, JudgmentContext, QueryExample

PASSAGE = ("The duke ruled Normandy's coast for years. Bakers bake bread daily in the old town. "
           "Fishermen sell their catch at dawn.")


def ctx(expected: str, retrieved: str) -> JudgmentContext:
    return JudgmentContext(query="q", expected_text=expected, retrieved_text=retrieved)


def test_trigram_cover() -> None:
    answer = trigrams("Normandy")
    assert cover(answer, "Normandy's") >= MIN_COVER
    assert cover(answer, "NORMANDY") == 1.0  # the contains normalisation: case folded
    assert cover(answer, "bread") < MIN_COVER
    assert cover(frozenset(), "anything") == 1.0
    for answer in ("Normandy", "the old town", "Zzyzx"):  # the whole-text shortcut keeps the per-window rule
        windows = text_windows(PASSAGE, len(answer.split()))
        assert kept_windows(answer, PASSAGE, windows, MIN_COVER) == tuple(
            w for w in windows if cover(trigrams(answer), w) >= MIN_COVER)
    assert kept_windows("Zzyzx", PASSAGE, text_windows(PASSAGE, 1), MIN_COVER) == ()


def test_only_windows_holding_the_answers_trigrams_are_encoded(loaded_judge: SemanticJudge,
                                                                count_encodes: object) -> None:
    context = ctx("Normandy", PASSAGE)
    windows = text_windows(PASSAGE, 1)
    full = SemanticJudge(threshold=0.8, prefilter=False)
    assert full.batch_judge([context]) == [True]  # "Normandy's" is close to "Normandy"
    assert len(count_encodes.texts) == 1 + len(windows)  # type: ignore[attr-defined]
    count_encodes.texts.clear()  # type: ignore[attr-defined]
    kept = SemanticJudge(threshold=0.8, prefilter=MIN_COVER)
    kept.prepare([context])
    assert kept.batch_judge([context]) == [True]  # the same verdict
    assert sorted(count_encodes.texts) == ["Normandy", "Normandy's"]  # type: ignore[attr-defined]
    assert kept.stats()["prefilter_skipped"] == len(windows) - 1
    # scores stay exact: batch_score compares every window, whatever the prefilter
    assert kept.batch_score([context]) == pytest.approx(full.batch_score([context]))


def test_a_pair_without_a_kept_window_costs_no_encode(loaded_judge: SemanticJudge, count_encodes: object) -> None:
    judge = SemanticJudge()  # default threshold 0.94: the prefilter is on
    assert judge.prefilter == MIN_COVER
    assert judge.batch_judge([ctx("Switzerland", "Bakers bake bread daily in the old town.")]) == [False]
    assert count_encodes.texts == []  # type: ignore[attr-defined]
    assert judge.stats()["texts_encoded"] == 0


def test_the_prefilter_is_off_below_its_threshold_and_checked() -> None:
    assert SemanticJudge(threshold=0.9).prefilter == 0.0  # paraphrases share fewer characters: every window
    assert SemanticJudge(threshold=0.8, prefilter=0.5).prefilter == 0.5  # a number applies at any threshold
    assert SemanticJudge(prefilter="false").prefilter == 0.0
    assert SemanticJudge().config()["prefilter"] == MIN_COVER
    for bad in (1.5, "often"):
        with pytest.raises(EvretError, match="semantic judge: prefilter"):
            SemanticJudge(prefilter=bad)


def test_encoding_reports_progress_before_judging(loaded_judge: SemanticJudge) -> None:
    sentences = [f"Sentence number {w} talks about the {w} harbour." for w in
                 "one two three four five six seven eight nine ten eleven twelve".split()]
    queries = [QueryExample(query_id=f"q{i}", query_text=f"question {i}", expected_answers=[s.replace("harbour", "port")])
               for i, s in enumerate(sentences)]
    run = {q.query_id: [{"doc_id": f"d{j}", "text": s} for j, s in enumerate(sentences)] for q in queries}
    events: list[tuple[str, int, int]] = []
    judge = SemanticJudge(threshold=0.8, batch_size=2)  # 16 texts per model call: several progress steps
    results = Evaluator(run, metrics=["recall@12"], judge=judge, k=12,
                        progress=lambda *event: events.append(event)).evaluate(EvaluationDataset(queries=queries))
    encode = [e for e in events if e[0] == "encode"]
    total = results.stats["judge"]["texts_encoded"]
    assert total == 24  # 12 answers + 12 sentences, each once
    assert [e[1] for e in encode] == [0, 16, 24] and {e[2] for e in encode} == {total}  # 0: drawn before loading
    assert events.index(encode[-1]) < next(i for i, e in enumerate(events) if e[0] == "judge" and e[1] > 0)
