"""The results schema: intervals, slices, manifest and curves from the evaluator, and the JSON round trip."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from evret_core import EvaluationDataset, Evaluator, QueryExample
from evret_core.contracts.errors import EvretError
from evret_core.report.terminal import print_scores
from evret_core.results.evaluation import SCHEMA_VERSION, EvaluationResults


def test_evaluator_adds_intervals_slices_and_manifest(id_runs, id_dataset) -> None:  # type: ignore[no-untyped-def]
    r = id_runs["full"]
    assert r.schema_version == SCHEMA_VERSION == 2
    assert r.confidence_level == 0.95
    for metric in r.metrics:
        low, high = r.intervals[metric]
        values = np.array([q.scores[metric] for q in r.per_query.values()])
        assert r.scores[metric] == pytest.approx(values.mean())
        assert low < r.scores[metric] < high
        # a 95% interval of a mean over ~300 queries: about 4 standard errors wide
        se = values.std(ddof=1) / np.sqrt(values.size)
        assert 3.0 * se < high - low < 5.0 * se
    lengths = r.slices["length"]
    assert set(lengths) == {"short", "long"}
    assert sum(s.n for s in lengths.values()) == len(id_dataset)
    short = [q for q in r.per_query.values() if q.tags["length"] == "short"]
    assert lengths["short"].scores["ndcg@10"] == pytest.approx(np.mean([q.scores["ndcg@10"] for q in short]))
    assert r.slices["numbers"]["yes"].n == sum(1 for q in r.per_query.values() if "numbers" in q.tags)
    assert any(s.small for tag in r.slices.values() for s in tag.values()) or all(
        s.n >= 40 for tag in r.slices.values() for s in tag.values())
    m = r.manifest
    assert m is not None
    assert m.dataset["hash"] == id_dataset.content_hash()
    assert m.dataset["num_queries"] == len(id_dataset)
    assert m.retriever == {"name": "full", "model": "tfidf-full"}
    assert m.models == {"retriever.model": "tfidf-full"}
    assert m.seed == 0 and m.statistics["n_resamples"] == 1000 and m.statistics["min_slice_size"] == 40
    assert m.evret_version and re.match(r"\d{4}-\d\d-\d\dT", m.created_at)


def test_small_slices_are_flagged_not_hidden(id_dataset, retrievers) -> None:  # type: ignore[no-untyped-def]
    r = Evaluator(retrievers["titles"], ["recall@10"], n_resamples=200, min_slice_size=200).evaluate(id_dataset)
    sizes = {v: s.n for v, s in r.slices["length"].items()}
    assert all(r.slices["length"][v].small == (n < 200) for v, n in sizes.items())
    assert any(s.small for s in r.slices["length"].values())


def test_seed_and_level_change_intervals(id_dataset, retrievers) -> None:  # type: ignore[no-untyped-def]
    def run(**kw: object) -> EvaluationResults:
        return Evaluator(retrievers["titles"], ["ndcg@10"], n_resamples=300, **kw).evaluate(id_dataset)

    a, b, c = run(seed=1), run(seed=1), run(seed=2)
    assert a.intervals == b.intervals and a.intervals != c.intervals
    wide, narrow = run(confidence_level=0.99), run(confidence_level=0.5)
    assert wide.intervals["ndcg@10"][0] < narrow.intervals["ndcg@10"][0]
    with pytest.raises(EvretError, match="confidence_level"):
        Evaluator(retrievers["titles"], ["ndcg@10"], confidence_level=1.5)


def test_json_round_trip_keeps_everything(id_runs, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    r = id_runs["titles"]
    path = tmp_path / "r.json"
    r.to_json(path)
    data = json.loads(path.read_text())
    assert {"schema_version", "scores", "intervals", "per_query", "slices", "manifest"} <= set(data)
    first = next(iter(data["per_query"].values()))
    assert {"scores", "retrieved_ids", "judgments", "relevant_ids", "tags"} <= set(first)
    back = EvaluationResults.from_json(path)
    assert back == r


def test_version_1_files_load_and_newer_ones_are_refused(id_runs, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    data = json.loads(id_runs["titles"].to_json())
    for key in ("intervals", "slices", "manifest", "confidence_level"):
        data.pop(key)
    data["schema_version"] = 1
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    loaded = EvaluationResults.from_json(old)
    assert loaded.intervals == {} and loaded.scores == id_runs["titles"].scores
    data["schema_version"] = 99
    old.write_text(json.dumps(data))
    with pytest.raises(EvretError, match=r"old.json: results schema_version 99 is newer"):
        EvaluationResults.from_json(old)
    (tmp_path / "other.json").write_text('{"a": 1}')
    with pytest.raises(EvretError, match="other.json: not an Evret results file"):
        EvaluationResults.from_json(tmp_path / "other.json")


@pytest.mark.parametrize("matching", ["first_match", "any_match"])
def test_curves_from_stored_judgments_equal_the_scores(text_dataset, retrievers, matching, tmp_path) -> None:  # type: ignore[no-untyped-def]
    metrics = ["recall@1", "recall@5", "ndcg@3", "ndcg@10", "precision@5", "mrr@10", "hit_rate@2", "ap@10"]
    r = Evaluator(retrievers["full"], metrics, judge="token-overlap", matching=matching,
                  n_resamples=100).evaluate(text_dataset)
    assert any(j.matched for q in r.per_query.values() for j in q.judgments)  # the judge found matches
    r.to_json(tmp_path / "r.json")
    curves = EvaluationResults.from_json(tmp_path / "r.json").metric_curves()
    assert set(curves) == {"recall", "ndcg", "precision", "mrr", "hit_rate", "ap"}
    assert all(len(v) == 10 for v in curves.values())
    for metric in metrics:
        family, k = metric.split("@")
        assert curves[family][int(k) - 1] == pytest.approx(r.scores[metric], abs=1e-12), metric


def test_manifest_records_judge_model_and_prompt_hash(text_dataset, retrievers) -> None:  # type: ignore[no-untyped-def]
    from evret_core.contracts.judge import Judge

    class PromptJudge(Judge):
        name = "prompt-judge"

        def judge(self, context):  # type: ignore[no-untyped-def]
            return context.expected_text.lower()[:20] in context.retrieved_text.lower()

        def config(self):  # type: ignore[no-untyped-def]
            return {"name": self.name, "model": "m-1", "prompt_hash": "abc123", "options": {"temperature": 0}}

    r = Evaluator(retrievers["full"], ["recall@5"], judge=PromptJudge(), n_resamples=50).evaluate(text_dataset)
    assert r.manifest is not None
    assert r.manifest.judge == {"name": "prompt-judge", "model": "m-1", "prompt_hash": "abc123",
                                "options": {"temperature": 0}}
    assert r.manifest.models == {"retriever.model": "tfidf-full", "judge.model": "m-1", "judge.prompt_hash": "abc123"}


def test_terminal_output_shows_intervals_and_slices(id_runs, capsys) -> None:  # type: ignore[no-untyped-def]
    r = id_runs["full"]
    print_scores(r, title="scifact")
    out = capsys.readouterr().out
    low, high = r.intervals["ndcg@10"]
    assert re.search(rf"^ndcg@10\s+{r.scores['ndcg@10']:.3f} \[{low:.3f}, {high:.3f}\]$", out, re.M)
    assert "value (95% CI)" in out
    assert "slices by length:" in out and re.search(r"short\s+\d+\s+0\.\d{3} \[", out)


def test_one_query_dataset_has_degenerate_interval() -> None:
    ds = EvaluationDataset(queries=[QueryExample(query_id="a", query_text="x", relevant_doc_ids=["d1"])])
    r = Evaluator(lambda q, k: [{"doc_id": "d1"}], ["recall@1"]).evaluate(ds)
    assert r.intervals == {"recall@1": [1.0, 1.0]}
