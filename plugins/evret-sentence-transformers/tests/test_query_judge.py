"""The query-similarity judge on the packaged all-MiniLM-L6-v2: cosine(query, passage) clipped to [0, 1], grades from
thresholds, the verdict at the cut, thresholds checked before any encode, the semantic judge's embedding cache.
Cosines are compared with the model's own embeddings within 1e-5 (float32 arithmetic differs across CPUs)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from evret_sentence_transformers import QuerySimilarityJudge, SemanticJudge

from evret_core import EvretError, create_judge
from evret_core.contracts.judge import JudgmentContext, reference_free_context
from evret_core.evaluation.executors import LocalExecutor
from evret_core.testing import JudgeConformance

TOLERANCE = 1e-5
PAIRS = [
    ("how tall is the eiffel tower", "The Eiffel Tower is 330 metres tall."),
    ("how tall is the eiffel tower", "The Eiffel Tower is in Paris, France."),
    ("how tall is the eiffel tower", "Paris has many museums."),
    ("how tall is the eiffel tower", "Bananas are yellow."),
]


def contexts() -> list[JudgmentContext]:
    return [reference_free_context(q, p) for q, p in PAIRS]


def model_cosines(loaded_judge: SemanticJudge) -> np.ndarray:
    model = loaded_judge.encoder.model
    left, right = model.encode([q for q, _ in PAIRS]), model.encode([p for _, p in PAIRS])
    cos = np.sum(left * right, axis=1) / (np.linalg.norm(left, axis=1) * np.linalg.norm(right, axis=1))
    return np.clip(cos.astype(np.float64), 0.0, 1.0)


def test_the_score_is_the_clipped_cosine_of_query_and_passage(loaded_judge: SemanticJudge) -> None:
    judge = QuerySimilarityJudge(thresholds=[0.2, 0.5, 0.8])
    expected = model_cosines(loaded_judge)
    np.testing.assert_allclose(judge.batch_score(contexts()), expected, rtol=0, atol=TOLERANCE)
    assert expected[0] > expected[1] > expected[2] > expected[3] >= 0.0  # these pairs order as a reader would
    # the expected answer is never read
    other = [JudgmentContext(query=q, expected_text="Bananas are yellow.", retrieved_text=p) for q, p in PAIRS]
    assert judge.batch_score(other) == judge.batch_score(contexts())


def test_the_grade_is_the_number_of_thresholds_the_score_reaches(loaded_judge: SemanticJudge) -> None:
    cos = model_cosines(loaded_judge)
    # thresholds half-way between the pairs' cosines (far from any of them, so the grades are not a rounding matter)
    middles = [float((cos[i] + cos[i + 1]) / 2) for i in (2, 1, 0)]
    assert min(abs(m - c) for m in middles for c in cos) > 100 * TOLERANCE
    judge = QuerySimilarityJudge(thresholds=middles)
    assert judge.grades == 3 and judge.reference_free and judge.cut == 2 and judge.threshold == middles[1]
    assert judge.batch_grade(contexts()) == [3.0, 2.0, 1.0, 0.0]
    assert judge.batch_judge(contexts()) == [True, True, False, False]
    equal = QuerySimilarityJudge(thresholds=[middles[1]] * 3)  # equal thresholds: a jump of three grades
    assert equal.batch_grade(contexts()) == [3.0, 3.0, 0.0, 0.0]


@pytest.mark.parametrize("cut", [1, 2, 3])
def test_the_verdict_is_the_score_at_the_cuts_threshold_and_the_grade_at_the_cut(cut: int) -> None:
    judge = QuerySimilarityJudge(thresholds=[0.3, 0.5, 0.75], cut=cut)
    scores, grades, verdicts = (judge.batch_score(contexts()), judge.batch_grade(contexts()),
                                judge.batch_judge(contexts()))
    assert judge.threshold == [0.3, 0.5, 0.75][cut - 1]
    assert verdicts == [s >= judge.threshold for s in scores] == [g >= cut for g in grades]  # type: ignore[operator]
    assert [judge.judge(c) for c in contexts()] == verdicts
    run = LocalExecutor().grade(judge, contexts(), 2, lambda done: None)
    assert run.grades == grades and run.verdicts == verdicts


@pytest.mark.parametrize(("options", "message"), [
    ({}, "option 'thresholds' is required.*no defaults yet: fit them"),
    ({"thresholds": [0.7, 0.5, 0.6]}, "'thresholds' must be non-decreasing"),
    ({"thresholds": [0.2, 1.5]}, "'thresholds' holds cosine scores in \\[0, 1\\]"),
    ({"thresholds": [0.2, float("nan")]}, "'thresholds' holds cosine scores"),
    ({"thresholds": [0.2, True]}, "'thresholds' holds cosine scores"),
    ({"thresholds": "0.5"}, "'thresholds' must be a list"),
    ({"thresholds": []}, "'thresholds' must be a list"),
    ({"thresholds": [0.2, 0.4, 0.6], "cut": 4}, "'cut' must be a grade from 1 to 3"),
    ({"thresholds": [0.2, 0.4, 0.6], "cut": 0}, "'cut'"),
])
def test_bad_options_are_refused_naming_them(options: dict[str, object], message: str) -> None:
    with pytest.raises(EvretError, match=f"query-similarity judge: (option )?{message}"):
        create_judge("query-similarity", **options)


def test_embeddings_come_from_the_semantic_judges_cache(tmp_path: Path, loaded_judge: SemanticJudge) -> None:
    cache = tmp_path / "embeddings.sqlite"
    first = QuerySimilarityJudge(thresholds=[0.2, 0.5, 0.8], cache=str(cache))
    scores = first.batch_score(contexts())
    assert first.stats()["texts_encoded"] == 5  # one query, four passages
    again = QuerySimilarityJudge(thresholds=[0.2, 0.5, 0.8], cache=str(cache))
    np.testing.assert_allclose(again.batch_score(contexts()), scores, rtol=0, atol=TOLERANCE)
    assert again.stats()["texts_encoded"] == 0 and again.stats()["cache_hits"] == 5
    assert again.config()["thresholds"] == [0.2, 0.5, 0.8] and again.config()["cut"] == 2


class TestQuerySimilarityJudgeConformance(JudgeConformance):
    @pytest.fixture
    def judge(self, loaded_judge: SemanticJudge) -> QuerySimilarityJudge:
        return QuerySimilarityJudge(thresholds=[0.3, 0.5, 0.7])


def test_evret_calibrate_fits_the_thresholds_on_graded_pairs_and_saves_the_list(
        tmp_path: Path, loaded_judge: SemanticJudge) -> None:
    import json
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    from evret_core.calibration.grade_thresholds import fit_cuts
    from evret_core.cli import main

    (tmp_path / "queries.tsv").write_text("q1\thow tall is the eiffel tower\n", encoding="utf-8")
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps({"_id": f"d{i}", "text": p}) + "\n"
                                                   for i, (_, p) in enumerate(PAIRS)), encoding="utf-8")
    (tmp_path / "qrels.txt").write_text("".join(f"q1 0 d{i} {3 - i}\n" for i in range(len(PAIRS))), encoding="utf-8")
    config = tmp_path / "eval.toml"
    out = tmp_path / "calibration.json"
    assert main(["calibrate", "--queries", str(tmp_path / "queries.tsv"), "--qrels", str(tmp_path / "qrels.txt"),
                 "--corpus", str(tmp_path / "corpus.jsonl"), "--judge", "query-similarity",
                 "--judge-option", "thresholds=[0,0,0]", "--save-threshold", str(config), "-o", str(out),
                 "--n-resamples", "20"]) == 0
    [entry] = json.loads(out.read_text(encoding="utf-8"))["graded"]
    cosines = QuerySimilarityJudge(thresholds=[0, 0, 0]).batch_score(contexts())
    expected = fit_cuts(cosines, [3, 2, 1, 0], 3)  # each grade starts at its own pair's cosine
    np.testing.assert_allclose(entry["fitted_thresholds"], expected, rtol=0, atol=TOLERANCE)
    saved = tomllib.loads(config.read_text(encoding="utf-8"))["judge"]
    assert saved["name"] == "query-similarity" and saved["thresholds"] == entry["fitted_thresholds"]
    # each fitted threshold is a pair's own cosine: lowered by a margin (far below the gaps between these cosines)
    # so that a re-encode differing in the last float32 bit cannot move a grade
    fitted = QuerySimilarityJudge(thresholds=[max(0.0, t - 100 * TOLERANCE) for t in saved["thresholds"]])
    assert fitted.batch_grade(contexts()) == [3.0, 2.0, 1.0, 0.0]  # the fitted judge agrees with the labels
