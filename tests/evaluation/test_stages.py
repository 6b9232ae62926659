"""A pipeline of stages in one run (evret_core/evaluation/stages.py): every option checked before anything is
built, each stage's ranking made once and scored exactly as the stage evaluated alone, the judge asked once per
distinct context across the stages, each stage's difference over the stages it reads equal to ``evret compare`` of
the two runs (Holm over the pipeline's family), the queries helped and hurt most, and the recall packing keeps."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import evret_core
from evret_core import EvaluationDataset, Evaluator, create_retriever, hookimpl
from evret_core.contracts.errors import EvretError
from evret_core.contracts.judge import Judge, JudgmentContext
from evret_core.contracts.rerank import Reranker
from evret_core.contracts.retrieve import RankedColumns
from evret_core.evaluation.stages import evaluate_pipeline, parse_pipeline, read_pipeline_file, run_stages
from evret_core.plugins.loading import register_plugin
from evret_core.retrieve.packing import pack, token_counter
from evret_core.statistics.inference import bootstrap_intervals, holm_bonferroni

REPO = Path(__file__).resolve().parents[2]
CORPUS = str(REPO / "examples" / "corpus.jsonl")
METRICS = ["ndcg@5", "recall@10", "mrr@10"]
BUDGET = 150


class SharedWords(Reranker):
    """The query's words found in the candidate's text."""

    name = "shared-words"

    def score(self, query: str, candidates: RankedColumns) -> list[float]:
        words = set(query.lower().split())
        return [float(len(words & set(str(t).lower().split()))) for t in candidates.texts or ()]


class CountingJudge(Judge):
    """Matches when the retrieved text holds the expected answer's first three words; counts every context it is
    asked to judge."""

    name = "counting"

    def __init__(self) -> None:
        self.seen: Counter[JudgmentContext] = Counter()

    def judge(self, context: JudgmentContext) -> bool:
        self.seen[context] += 1
        words = context.expected_text.lower().split()[:3]
        return all(w in context.retrieved_text.lower() for w in words)


class Parts:
    @hookimpl
    def register_rerankers(self, register: Any) -> None:
        register("shared-words", SharedWords)


@pytest.fixture(autouse=True)
def parts() -> None:
    register_plugin(Parts(), name="pipeline-test-parts")


def stages(budget: int = BUDGET) -> list[dict[str, Any]]:
    return [
        {"name": "bm25", "retriever": {"name": "bm25", "options": {"corpus": CORPUS}}},
        {"name": "plain", "retriever": {"name": "bm25", "options": {"corpus": CORPUS, "k1": 1.5, "stemmer": None}}},
        {"name": "rrf", "fuse": ["bm25", "plain"], "method": "rrf"},
        {"name": "rerank", "reranker": "shared-words", "depth": 10},
        {"name": "packed", "pack": budget},
    ]


@pytest.fixture(scope="module")
def dataset() -> EvaluationDataset:
    return EvaluationDataset.load(str(REPO / "examples" / "dataset.jsonl"))


def hybrid() -> dict[str, Any]:
    return {"name": "hybrid", "options": {"method": "rrf", "depth": 10,
                                          "retrievers": [s["retriever"] for s in stages()[:2]]}}


def alone(dataset: EvaluationDataset, judge: Any) -> dict[str, Any]:
    """Each stage evaluated as a run of its own, from scratch."""
    options = {"metrics": METRICS, "judge": judge, "k": 10, "n_resamples": 200}
    runs = {
        "bm25": create_retriever("bm25", corpus=CORPUS),
        "plain": create_retriever("bm25", corpus=CORPUS, k1=1.5, stemmer=None),
        "rrf": create_retriever("hybrid", **hybrid()["options"]),
        "rerank": create_retriever("rerank", retriever=hybrid(), reranker="shared-words", depth=10),
    }
    out = {name: Evaluator(r, **options).evaluate(dataset) for name, r in runs.items()}
    ranked = runs["rerank"].batch_retrieve_columns([q.query_text for q in dataset.queries], 10)
    packed = {q.query_id: RankedColumns.from_results(pack(r.to_results(), BUDGET, token_counter(None)))
              for q, r in zip(dataset.queries, ranked, strict=True)}
    out["packed"] = Evaluator(packed, **options).evaluate(dataset)
    return out


@pytest.fixture(scope="module")
def both(dataset: EvaluationDataset) -> tuple[Any, dict[str, Any]]:
    register_plugin(Parts(), name="pipeline-test-parts")
    piped = evaluate_pipeline(parse_pipeline({"stages": stages()}, "test [pipeline]"), dataset, METRICS,
                              judge="token-overlap", n_resamples=200)
    return piped, alone(dataset, "token-overlap")


def test_each_stage_scores_exactly_as_the_stage_evaluated_alone(both: tuple[Any, dict[str, Any]]) -> None:
    piped, separate = both
    assert list(piped.stages) == ["bm25", "plain", "rrf", "rerank", "packed"]
    for name, results in piped.stages.items():
        assert results.scores == separate[name].scores, name
        assert results.intervals == separate[name].intervals, name
        assert results.per_query_scores() == separate[name].per_query_scores(), name
        for qid in ("q01", "q07"):
            assert results.per_query[qid].retrieved_ids == separate[name].per_query[qid].retrieved_ids
    # the stages really differ (or the test would prove little)
    assert piped.stages["rerank"].scores != piped.stages["rrf"].scores
    assert piped.stages["packed"].scores["recall@10"] < piped.stages["rerank"].scores["recall@10"]


def test_the_judge_sees_each_distinct_context_once_across_the_stages(dataset: EvaluationDataset) -> None:
    judge = CountingJudge()
    settings = parse_pipeline({"stages": stages()}, "test [pipeline]")
    piped = evaluate_pipeline(settings, dataset, METRICS, judge=judge, n_resamples=50)
    assert judge.seen and set(judge.seen.values()) == {1}
    # the union of what each stage plans; separately, the stages would judge many contexts several times
    planned: set[JudgmentContext] = set()
    for ranking in run_stages(settings, dataset, 10).values():
        stage = Evaluator(dict(zip([q.query_id for q in dataset.queries], ranking, strict=True)), METRICS, k=10)
        planned |= set(stage.plan_judgments(dataset, stage.retrieve_rows(dataset)))
    assert set(judge.seen) == planned
    separate = alone(dataset, CountingJudge())
    total = sum(results.stats["judgments"]["unique"] for results in separate.values())
    assert piped.judging["distinct_contexts"] == len(planned) < piped.judging["planned_by_stages"] == total
    # the verdicts served from that one judging are the judge's: each stage equals that stage judged alone
    assert all(piped.stages[n].scores == separate[n].scores for n in piped.stages)


def test_each_difference_is_evret_compare_of_the_two_stages(both: tuple[Any, dict[str, Any]]) -> None:
    piped, separate = both
    assert [(c["over"], c["stage"]) for c in piped.comparisons][::len(METRICS)] == [
        ("bm25", "rrf"), ("plain", "rrf"), ("rrf", "rerank"), ("rerank", "packed")]
    for c in piped.comparisons:
        a, b = separate[c["over"]], separate[c["stage"]]
        pair = next(p for p in evret_core.compare({c["over"]: a, c["stage"]: b}).pairs if p.metric == c["metric"])
        assert (c["delta"], c["p_value"], c["n"]) == (pair.delta, pair.p_value, pair.n)
        assert c["effect_size"] == (pair.effect_size if np.isfinite(pair.effect_size) else None)
        assert (c["before"], c["after"]) == (a.scores[c["metric"]], b.scores[c["metric"]])
        qa, qb = a.per_query_scores(), b.per_query_scores()
        diff = [qb[q][c["metric"]] - qa[q][c["metric"]] for q in qa]
        assert c["interval"] == bootstrap_intervals({"d": diff}, 0.95, 200, 0)["d"]
    adjusted = holm_bonferroni([c["p_value"] for c in piped.comparisons])
    assert [c["p_adjusted"] for c in piped.comparisons] == adjusted
    assert [c["significant"] for c in piped.comparisons] == [p < 0.05 for p in adjusted]


def test_helped_and_hurt_are_the_queries_that_moved_most(both: tuple[Any, dict[str, Any]]) -> None:
    piped, separate = both
    moved = [c for c in piped.comparisons if c["helped"] or c["hurt"]]
    assert moved
    for c in moved:
        before, after = separate[c["over"]].per_query_scores(), separate[c["stage"]].per_query_scores()
        deltas = {q: after[q][c["metric"]] - before[q][c["metric"]] for q in before}
        for row in c["helped"] + c["hurt"]:
            q = row["query_id"]
            assert (row["before"], row["after"], row["delta"]) == (before[q][c["metric"]], after[q][c["metric"]],
                                                                   deltas[q])
        assert all(r["delta"] > 0 for r in c["helped"]) and all(r["delta"] < 0 for r in c["hurt"])
        assert [r["delta"] for r in c["helped"]] == sorted((d for d in deltas.values() if d > 0), reverse=True)[:5]
        assert [r["delta"] for r in c["hurt"]] == sorted(d for d in deltas.values() if d < 0)[:5]


def test_packing_reports_the_recall_that_survives_the_budget(both: tuple[Any, dict[str, Any]]) -> None:
    piped, separate = both
    packing = piped.packing["packed"]
    recall = packing["recall"]["recall@10"]
    assert recall["input"] == separate["rerank"].scores["recall@10"]
    assert recall["packed"] == separate["packed"].scores["recall@10"]
    assert recall["survives"] == recall["packed"] / recall["input"] < 1
    assert packing["budget"] == BUDGET and packing["kept"] < packing["offered"] <= 10
    assert set(packing["recall"]) == {"recall@10"}  # only the recall metrics asked


def test_a_stage_reads_the_rankings_it_is_given_and_is_never_recomputed(dataset: EvaluationDataset) -> None:
    """The reranker reranks the fused ranking the pipeline made (its top ``depth``), once per query."""
    asked: list[tuple[str, int]] = []

    class Spy(Reranker):
        name = "spy"

        def score(self, query: str, candidates: RankedColumns) -> list[float]:
            asked.append((query, len(candidates)))
            return [float(-i) for i in range(len(candidates))]

    class More:
        @hookimpl
        def register_rerankers(self, register: Any) -> None:
            register("spy", Spy)

    register_plugin(More(), name="pipeline-spy")
    settings = parse_pipeline({"stages": [*stages()[:3], {"name": "same", "reranker": "spy", "depth": 4}]}, "t")
    piped = evaluate_pipeline(settings, dataset, ["recall@10"], judge="token-overlap", n_resamples=20)
    assert [q for q, _ in asked] == [q.query_text for q in dataset.queries] and max(n for _, n in asked) == 4
    rrf, same = piped.stages["rrf"], piped.stages["same"]
    for q in dataset.queries:  # a reranker keeping the order gives the fused top 4
        assert list(same.per_query[q.query_id].retrieved_ids) == list(rrf.per_query[q.query_id].retrieved_ids)[:4]


# -- every option checked before anything is built -----------------------------------------------------------
BAD = [
    ({"stages": []}, "test [pipeline]: option 'stages' must be a non-empty list"),
    ({"stages": [{"retriever": "bm25"}]}, "stages[0]: option 'name' is missing"),
    ({"stage": []}, "unknown key 'stage' (did you mean stages?)"),
    ({"stages": [], "test": "welch"}, "option 'test' must be one of t, randomization, bootstrap"),
    ({"stages": [{"name": "a", "retriever": "bm25", "dpeth": 10}]},
     "stages[0] ('a'): unknown key 'dpeth' (did you mean depth?)"),
    ({"stages": [{"name": "a", "retriever": "bm25", "fuse": ["a", "b"]}]}, "exactly one of the keys"),
    ({"stages": [{"name": "a", "retreiver": "bm25"}]}, "unknown key 'retreiver' (did you mean retriever?)"),
    ({"stages": [{"name": "a", "pack": 100}]}, "the first stage must be a retriever"),
    ({"stages": [{"name": "a", "retriever": "bm25"}, {"name": "a", "retriever": "bm25"}]}, "two stages are named"),
    ({"stages": [{"name": "a", "retriever": "bm25"}, {"name": "f", "fuse": ["a", "bm2"]}]},
     "stages[1] ('f'): option 'fuse' must name an earlier stage, got 'bm2'"),
    ({"stages": [{"name": "a", "retriever": "bm25"}, {"name": "f", "fuse": ["a"]}]}, "two or more earlier stages"),
    ({"stages": [{"name": "a", "retriever": "bm25"}, {"name": "b", "retriever": "bm25"},
                 {"name": "f", "fuse": ["a", "b"], "method": "rff"}]}, "method='rff' is not a fusion method"),
    ({"stages": [{"name": "a", "retriever": "bm25"}, {"name": "b", "retriever": "bm25"},
                 {"name": "f", "fuse": ["a", "b"], "method": "wsum", "weights": [1]}]}, "stages[2] ('f')"),
    ({"stages": [{"name": "a", "retriever": "bm2"}]}, "bm2"),
    ({"stages": [{"name": "a", "retriever": {"name": "bm25", "options": {"k2": 1}}}]},
     "option 'k2' (from test [pipeline] stages[0] ('a') options) is not an option of this retriever"),
    ({"stages": [{"name": "a", "retriever": "run"}]}, "a pipeline's stages read query texts"),
    ({"stages": [{"name": "a", "retriever": "bm25"}, {"name": "r", "reranker": "shared-wrods"}]}, "shared-wrods"),
    ({"stages": [{"name": "a", "retriever": "bm25"}, {"name": "r", "reranker": "shared-words", "input": "b"}]},
     "option 'input' must name an earlier stage"),
    ({"stages": [{"name": "a", "retriever": "bm25"}, {"name": "r", "reranker": "shared-words", "depth": 0}]},
     "option 'depth'"),
    ({"stages": [{"name": "a", "retriever": "bm25"}, {"name": "p", "pack": 0}]}, "the token budget, an integer >= 1"),
    ({"stages": [{"name": "a", "retriever": "bm25"}, {"name": "p", "pack": 10, "tokenizer": ""}]},
     "option 'tokenizer'"),
]


@pytest.mark.parametrize(("raw", "message"), BAD, ids=[m[:40] for _, m in BAD])
def test_every_bad_option_is_one_error_naming_the_table_and_key(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(EvretError) as caught:
        parse_pipeline(raw, "test [pipeline]")
    assert message in str(caught.value)


def test_a_tokenizer_that_cannot_load_fails_before_any_retriever_is_built(dataset: EvaluationDataset,
                                                                           tmp_path: Path) -> None:
    built: list[str] = []

    class Counted(Reranker):
        name = "counted"

        def __init__(self) -> None:
            built.append("reranker")

        def score(self, query: str, candidates: RankedColumns) -> list[float]:
            return [0.0] * len(candidates)

    class More:
        @hookimpl
        def register_rerankers(self, register: Any) -> None:
            register("counted", Counted)

    register_plugin(More(), name="pipeline-counted")
    settings = parse_pipeline({"stages": [stages()[0], {"name": "r", "reranker": "counted"},
                                          {"name": "p", "pack": 10, "tokenizer": str(tmp_path / "nothing")}]}, "t")
    with pytest.raises(EvretError, match=r"t stages\[2\] \('p'\): option tokenizer=.*no such tokenizer folder"):
        evaluate_pipeline(settings, dataset, ["recall@10"], judge="token-overlap")
    assert built == []  # not even the reranker


def test_a_pipeline_file_reads_paths_relative_to_itself(tmp_path: Path) -> None:
    (tmp_path / "corpus.jsonl").write_text((REPO / "examples" / "corpus.jsonl").read_text(encoding="utf-8"))
    path = tmp_path / "pipeline.toml"
    path.write_text('top = 3\n[[stages]]\nname = "bm25"\nretriever = { name = "bm25", options = { corpus = '
                    '"corpus.jsonl" } }\n', encoding="utf-8")
    settings = read_pipeline_file(path)
    assert settings.top == 3
    assert settings.stages[0].component == ("bm25", {"corpus": str(tmp_path / "corpus.jsonl")})
    path.write_text('dataset = "x"\n[pipeline]\nstages = []\n', encoding="utf-8")
    with pytest.raises(EvretError, match="holds the pipeline only, found dataset"):
        read_pipeline_file(path)
    path.write_text('[[stages]]\nname = "a"\nretriever = "bm25"\ndepht = 3\n', encoding="utf-8")
    with pytest.raises(EvretError, match=r"pipeline.toml stages\[0\] \('a'\): unknown key 'depht'"):
        read_pipeline_file(path)


def test_texts_are_needed_to_pack(dataset: EvaluationDataset) -> None:
    from evret_core import Retriever

    class NoText(Retriever):
        name = "no-text"

        def batch_retrieve_columns(self, queries: Sequence[str], k: int) -> list[RankedColumns]:
            return [RankedColumns(["bee-001"], [1.0], None) for _ in queries]

    class More:
        @hookimpl
        def register_retrievers(self, register: Any) -> None:
            register("no-text", NoText)

    register_plugin(More(), name="pipeline-no-text")
    settings = parse_pipeline({"stages": [{"name": "a", "retriever": "no-text"}, {"name": "p", "pack": 100}]}, "t")
    with pytest.raises(EvretError, match=r"t stages\[1\] \('p'\): packing reads texts, and stage 'a' gave none"):
        evaluate_pipeline(settings, dataset, ["recall@10"], judge="token-overlap")


class LengthGrade(Judge):
    """A graded judge that needs no expected answer: 0-3 by the passage's length; counts each context asked."""

    name = "length-grade"
    reference_free = True
    grades = 3
    cut = 2

    def __init__(self) -> None:
        self.seen: Counter[JudgmentContext] = Counter()

    def _grade(self, context: JudgmentContext) -> float:
        self.seen[context] += 1
        return float(min(3, len(context.retrieved_text.split()) // 8))

    def judge(self, context: JudgmentContext) -> bool:
        return self._grade(context) >= 2

    def batch_grade(self, contexts: Sequence[JudgmentContext]) -> list[float | None]:
        return [self._grade(c) for c in contexts]


def test_a_graded_judge_without_answers_grades_each_distinct_pair_once(dataset: EvaluationDataset) -> None:
    from evret_core import QueryExample

    bare = EvaluationDataset(queries=[QueryExample(query_id=q.query_id, query_text=q.query_text)
                                      for q in dataset.queries])
    judge = LengthGrade()
    settings = parse_pipeline({"stages": stages()}, "test [pipeline]")
    piped = evaluate_pipeline(settings, bare, ["ndcg@5", "precision@5"], judge=judge, k=10, n_resamples=50)
    assert judge.seen and set(judge.seen.values()) == {1}
    assert piped.judging["distinct_contexts"] == len(judge.seen) < piped.judging["planned_by_stages"]
    for name, ranking in run_stages(settings, bare, 10).items():
        run = dict(zip([q.query_id for q in bare.queries], ranking, strict=True))
        alone_results = Evaluator(run, ["ndcg@5", "precision@5"], judge=LengthGrade(), k=10,
                                  n_resamples=50).evaluate(bare)
        assert piped.stages[name].scores == alone_results.scores, name
        assert piped.stages[name].stats["judged"]["relevance_level"] == 2.0
