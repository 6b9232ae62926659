"""The lexical prefilter (issue 26, part 3) and the encoding progress (issue 24, problem 2), on the real model."""

from __future__ import annotations

import pytest
from evret_sentence_transformers import SemanticJudge
from evret_sentence_transformers.prefilter import (
    LONG_ANSWER_WORDS,
    MIN_COVER,
    MIN_STEM_COVER,
    cover,
    kept_windows,
    screen,
    stems,
    trigrams,
)
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


# -- the stem rule for long answers (whole abstracts): constructed edge cases against the unskipped judge ---------
ABSTRACT = ("Zebrafish regenerate heart muscle after injury, unlike adult mammals. We show that regeneration proceeds "
            "through the proliferation of existing cardiomyocytes rather than through stem cells. Genetic fate mapping "
            "in adult fish labelled cardiomyocytes before amputation of the ventricular apex, and labelled cells formed "
            "most of the new muscle within thirty days. Blocking retinoic acid signalling from the endocardium slowed "
            "this proliferation and left scar tissue in the wound. These results point to the dedifferentiation of "
            "mature heart cells as a target for therapies after myocardial infarction.")
REORDERED = ("Genetic fate mapping in adult fish labelled cardiomyocytes before amputation of the ventricular apex, and "
             "labelled cells formed most of the new muscle within thirty days. Blocking retinoic acid signalling from "
             "the endocardium slowed this proliferation and left scar tissue in the wound. These results point to the "
             "dedifferentiation of mature heart cells as a target for therapies after myocardial infarction. Zebrafish "
             "regenerate heart muscle after injury, unlike adult mammals. We show that regeneration proceeds through "
             "the proliferation of existing cardiomyocytes rather than through stem cells.")
# every sentence reworded by its endings: few whole words left, most stems kept (a match at 0.94)
INFLECTED = ("Zebrafish regenerated heart muscles after injuries, unlike an adult mammal. We showed that regenerating "
             "proceeded through proliferating existing cardiomyocyte rather than through a stem cell. Genetically "
             "fate-mapped adult fishes labelling cardiomyocyte before amputating the ventricle apex, and the labelling "
             "cell formed most new muscles within thirty day. Blocked retinoic acids signals from endocardial slowing "
             "the proliferating and leaving scarred tissues in wounds. The result points to dedifferentiating mature "
             "hearts cell as targets for therapy after myocardial infarctions.")
# the same field (many shared trigrams, so the trigram rule keeps it), another study
OTHER = ("Mammalian hearts lose most of their capacity for regeneration shortly after birth. In neonatal mice, "
         "resection of the ventricular apex is followed by complete repair within three weeks, driven by the "
         "proliferation of cardiomyocytes. We measured the cell cycle activity of cardiomyocytes in mice of "
         "different ages and found that it falls sharply within the first week of life. Hypoxia signalling and "
         "oxidative DNA damage were associated with this arrest. Restoring proliferation of adult cardiomyocytes "
         "could limit scar formation after myocardial infarction.")
# the abstract in one sentence: close in meaning (cosine ~0.86), far in words
SUMMARY = ("Zebrafish hearts regenerate by proliferation of existing cardiomyocytes, not stem cells; blocking "
           "retinoic acid from the endocardium slows it, which suggests dedifferentiation as a therapy target.")


def test_stems_and_the_rule_applies_to_long_answers_only() -> None:
    assert stems("The Normandy's BAKERS") == frozenset({"the", "norma", "baker"})  # case folded, endings cut
    windows = (OTHER,)
    assert screen(ABSTRACT, OTHER, windows, MIN_COVER, MIN_STEM_COVER) == (windows, ())  # trigrams keep, stems skip
    assert screen(ABSTRACT, OTHER, windows, MIN_COVER, 0.0) == (windows, windows)  # min_stems=0: no stem rule
    short = "the heart muscles of zebrafish regenerate"  # under LONG_ANSWER_WORDS words: trigrams only
    assert len(short.split()) < LONG_ANSWER_WORDS
    kept = kept_windows(short, OTHER, text_windows(OTHER, 6), MIN_COVER)
    assert kept and screen(short, OTHER, text_windows(OTHER, 6), MIN_COVER, MIN_STEM_COVER) == (kept, kept)
    assert cover(trigrams(ABSTRACT), OTHER) >= MIN_COVER  # why trigrams alone save nothing on abstracts
    assert len(stems(ABSTRACT) & stems(OTHER)) < MIN_STEM_COVER * len(stems(ABSTRACT))


def test_the_stem_rule_changes_no_verdict_on_edge_cases(loaded_judge: SemanticJudge, count_encodes: object) -> None:
    passage = f"{OTHER} {INFLECTED} {SUMMARY}"  # over twice the answer's length: windows of whole sentences
    texts = [REORDERED, INFLECTED, OTHER, SUMMARY, passage]
    contexts = [ctx(ABSTRACT, t) for t in texts]
    full = SemanticJudge(prefilter=False)  # every window encoded, the default threshold 0.94
    scores = full.batch_score(contexts)
    expected = full.batch_judge(contexts)
    assert expected == [True, True, False, False, True]  # reordered, inflected, the match inside a longer passage
    count_encodes.texts.clear()  # type: ignore[attr-defined]
    judge = SemanticJudge()
    assert judge.prefilter_stems == MIN_STEM_COVER and judge.config()["prefilter_stems"] == MIN_STEM_COVER
    judge.prepare(contexts)
    assert judge.batch_judge(contexts) == expected  # the same verdicts
    # OTHER and SUMMARY (cosines ~0.69 and ~0.86) were skipped by the stem rule; the trigram rule keeps them
    assert max(s for s, t in zip(scores, texts, strict=True) if t in (OTHER, SUMMARY)) < judge.threshold
    windows = text_windows(passage, len(ABSTRACT.split()))
    by_trigrams, kept = screen(ABSTRACT, passage, windows, MIN_COVER, MIN_STEM_COVER)
    assert by_trigrams == windows and INFLECTED in " ".join(kept)  # the passage's windows over INFLECTED are kept
    skipped = {OTHER, SUMMARY} | (set(windows) - set(kept))
    encoded = sorted({ABSTRACT, REORDERED, INFLECTED, *kept})
    assert sorted(count_encodes.texts) == encoded  # type: ignore[attr-defined]
    stats = judge.stats()
    assert stats["prefilter_skipped_stems"] == len(skipped) and stats["prefilter_skipped_trigrams"] == 0
    assert stats["prefilter_skipped"] == len(skipped) and stats["texts_encoded"] == len(encoded)
    assert judge.batch_score(contexts) == pytest.approx(scores)  # scores stay exact


def test_the_stem_rule_counts_apart_and_only_with_the_prefilter_at_high_thresholds(loaded_judge: SemanticJudge) -> None:
    assert SemanticJudge(threshold=0.8, prefilter=0.5).prefilter_stems == 0.0  # measured from 0.93 only
    assert SemanticJudge(prefilter=False).prefilter_stems == 0.0
    judge = SemanticJudge(prefilter=0.6)  # a stricter trigram share: the trigram rule now skips OTHER
    contexts = [ctx(ABSTRACT, OTHER), ctx(ABSTRACT, SUMMARY)]
    judge.prepare(contexts)
    assert judge.batch_judge(contexts) == [False, False]
    stats = judge.stats()
    assert (stats["prefilter_skipped_trigrams"], stats["prefilter_skipped_stems"]) == (3, 0)  # 2 texts + the answer
    assert stats["texts_encoded"] == 0
