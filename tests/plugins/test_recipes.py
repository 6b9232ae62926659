"""One recipe format for rebuilding parts on workers (issue 25 part 4): :class:`evret_core.plugins.recipes.Recipe`.

Every part an executor rebuilds (the retrieval evaluator's judge and retriever; the RAG harness's generator, claim
judge and relevance, whose recipes carry the resolver that made them) round-trips through the same ``recipe_of`` /
``rebuild`` pair, pickled as it travels to a worker; the RAG pipeline's ``build_parts`` is that same function; secrets in a recipe's options never show."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest

from evret_core import sdk
from evret_core.plugins.builder import rebuild
from evret_core.plugins.recipes import Recipe, recipe, recipe_of
from evret_core.plugins.registry import create_claim_judge, create_generator, create_judge, create_retriever
from evret_core.rag import RagEvaluator
from evret_core.rag.claims.claim_judges import LexicalClaimJudge
from evret_core.rag.claims.llm_judge import LLMClaimJudge, resolve_claim_judge
from evret_core.rag.generate.generators import PrecomputedGenerator, resolve_generator
from evret_core.rag.pipeline import Runner, build_parts
from evret_core.rag.scores.relevance import LexicalRelevance, LLMRelevance, resolve_relevance
from evret_core.testing.llm_provider import stub_options
from evret_core.testing.llm_stubs import isolate_llm_env

NOWHERE = type("Server", (), {"openai_base_url": "http://127.0.0.1:9/v1"})()  # never called: parts are only built


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return isolate_llm_env(monkeypatch, tmp_path, "EVRET_STUB_API_KEY")


def travelled(made: Recipe) -> Recipe:
    """The recipe as a worker receives it: pickled on the way."""
    back = pickle.loads(pickle.dumps(made))
    assert back == made
    return back


def config_of(part: Any) -> Any:
    return part.config() if callable(getattr(part, "config", None)) else vars(part)


def test_the_sdk_exports_the_one_format() -> None:
    assert sdk.Recipe is Recipe and sdk.rebuild is rebuild and sdk.recipe_of is recipe_of


def test_judge_round_trip() -> None:
    judge = create_judge("token-overlap", min_tokens=2)
    assert recipe(judge) == Recipe("judge", "token-overlap", {"min_tokens": 2})
    made = recipe_of("judge", judge)
    again = rebuild(travelled(made))
    assert type(again) is type(judge) and again is not judge
    assert again.min_tokens == 2 and recipe(again) == recipe(judge)


def test_llm_judge_round_trip_pins_its_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    judge = create_judge("llm", **stub_options(NOWHERE), cache="answers.sqlite3")
    made = recipe_of("judge", judge)
    assert made.options["cache"] == str((tmp_path / "answers.sqlite3").resolve())  # absolute: workers share it
    again = rebuild(travelled(made))
    assert Path(again.cache.path).resolve() == Path(judge.cache.path).resolve()
    assert again.model == judge.model


def test_a_rerank_retrievers_llm_reranker_gets_its_cache_pinned(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "corpus.jsonl").write_text('{"id": "d1", "text": "bees"}\n', encoding="utf-8")
    first = {"name": "bm25", "options": {"corpus": str(tmp_path / "corpus.jsonl")}}
    reranker = {"name": "llm", "options": {**stub_options(NOWHERE), "cache": "rerank.sqlite3"}}
    retriever = create_retriever("rerank", retriever=first, reranker=reranker)
    made = recipe_of("retriever", retriever)
    pinned = str((tmp_path / "rerank.sqlite3").resolve())
    assert made.options["reranker"] == {"name": "llm", "options": {**reranker["options"], "cache": pinned}}
    assert made.options["retriever"] == first  # no answer cache: as given
    again = rebuild(travelled(made))
    assert str(Path(again.reranker.cache.path).resolve()) == pinned


def test_a_cascades_llm_stages_get_their_caches_pinned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    middle = {"name": "llm", "band": [0.2, 0.9], "max_judgments": 5, "options": {**stub_options(NOWHERE)},
              "cache": "middle.sqlite3"}  # a judge option beside the stage keys, as a stage table may hold it
    last = {"name": "llm", "options": {**stub_options(NOWHERE), "cache": "last.sqlite3"}}
    stages = [{"name": "token-overlap", "band": [0.1, 0.8]}, middle, last]
    cascade = create_judge("cascade", stages=stages)
    made = recipe_of("judge", cascade)
    assert made.options["stages"][0] == {**stages[0], "options": {}}  # no answer cache: as given
    assert made.options["stages"][1] == {"name": "llm", "band": [0.2, 0.9], "max_judgments": 5, "options": {
        **stub_options(NOWHERE), "cache": str((tmp_path / "middle.sqlite3").resolve())}}
    assert made.options["stages"][2] == {"name": "llm", "options": {
        **last["options"], "cache": str((tmp_path / "last.sqlite3").resolve())}}
    assert stages[1] == middle and cascade.stages[1].max_judgments == 5  # the part's own options are left alone
    again = rebuild(travelled(made))
    for before, after in zip(cascade.stages, again.stages, strict=True):
        assert (after.band, after.max_judgments) == (before.band, before.max_judgments)
    assert [Path(s.judge.cache.path).resolve() for s in again.stages[1:]] == [
        (tmp_path / "middle.sqlite3").resolve(), (tmp_path / "last.sqlite3").resolve()]
    # a stage given by name alone keeps its form when nothing is pinned
    plain = recipe_of("judge", create_judge("cascade", stages=[{"name": "exact", "band": [0.0, 0.5]}, "contains"]))
    assert plain.options["stages"][1] == "contains"


def test_retriever_round_trip(tmp_path: Path) -> None:
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"q1": {"d1": 2.0, "d2": 1.0}}), encoding="utf-8")
    retriever = create_retriever("run", path=str(run))
    made = recipe_of("retriever", retriever)
    assert made == Recipe("retriever", "run", {"path": str(run)})
    again = rebuild(travelled(made))
    assert type(again) is type(retriever)
    assert [r.doc_id for r in again.results_for("q1", 2)] == \
        [r.doc_id for r in retriever.results_for("q1", 2)] == ["d1", "d2"]


def test_object_not_made_by_name_is_its_own_recipe() -> None:
    judge = create_judge("exact")
    assert recipe_of("retriever", judge) == Recipe.of_object("retriever", judge)  # built as a judge, not a retriever
    relevance = LexicalRelevance()
    made = recipe_of("relevance", relevance)
    assert not made.by_name and rebuild(made) is relevance
    assert rebuild(recipe_of("relevance", None)) is None


def test_generator_round_trips(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    extractive = create_generator("extractive")
    assert rebuild(travelled(recipe_of("generator", extractive))).config() == extractive.config()
    answers = tmp_path / "answers.jsonl"
    answers.write_text('{"question_id": "q1", "text": "9 am"}\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    evaluator = RagEvaluator(generator="answers.jsonl", conditions=["gold"], relevance="none")
    made = evaluator.recipes["generator"]
    # the file, not its answers, travels, with the resolver that read it
    assert made == Recipe("generator", str(answers.resolve()), {}, build=resolve_generator)
    again = rebuild(travelled(made))
    assert isinstance(again, PrecomputedGenerator) and again.answers == evaluator.generator.answers


def test_llm_generator_round_trip_keeps_options_and_hides_the_key() -> None:
    generator = create_generator("llm", **stub_options(NOWHERE), cache=False)
    made = recipe_of("generator", generator)
    assert made.options["cache"] is False and made.options["api_key"] == "sk-stub"
    assert "sk-stub" not in repr(made) and "sk-stub" not in str(made) and "'***'" in repr(made)
    again = rebuild(travelled(made))
    assert again.config() == generator.config() and again.cache is None


def test_claim_judge_round_trips() -> None:
    lexical = RagEvaluator(generator="extractive", conditions=["gold"], claim_judge="token-overlap",
                           claim_judge_options={"min_tokens": 3}).recipes["claim_judge"]
    # a judge's name: the harness's resolver makes the lexical claim judge over it
    assert lexical == Recipe("claim_judge", "token-overlap", {"min_tokens": 3}, build=resolve_claim_judge)
    again = rebuild(travelled(lexical))
    assert isinstance(again, LexicalClaimJudge) and again.config() == LexicalClaimJudge(
        "token-overlap", min_tokens=3).config()
    llm = create_claim_judge("llm", **stub_options(NOWHERE), cache=False)
    rebuilt = rebuild(travelled(recipe_of("claim_judge", llm)))
    assert isinstance(rebuilt, LLMClaimJudge) and rebuilt.config() == llm.config()


def test_relevance_round_trips() -> None:
    evaluator = RagEvaluator(generator="extractive", conditions=["gold"], relevance="llm",
                             relevance_options={**stub_options(NOWHERE), "cache": False})
    made = evaluator.recipes["relevance"]
    assert made.kind == "relevance" and made.name == "llm" and made.options["cache"] is False
    again = rebuild(travelled(made))
    assert isinstance(again, LLMRelevance) and again.config() == evaluator.relevance.config()
    lexical = RagEvaluator(generator="extractive", conditions=["gold"]).recipes["relevance"]
    assert lexical == Recipe("relevance", "lexical", {}, build=resolve_relevance)
    assert isinstance(rebuild(lexical), LexicalRelevance)
    off = RagEvaluator(generator="extractive", conditions=["gold"], relevance="none").recipes["relevance"]
    assert rebuild(off) is None


def test_rag_and_retrieval_rebuild_through_the_same_function() -> None:
    judge = create_judge("token-overlap")
    evaluator = RagEvaluator(generator="extractive", conditions=["gold"], claim_judge=judge)
    recipes = {**evaluator.recipes, "judge": recipe_of("judge", judge)}
    parts = build_parts(recipes)
    assert {role: config_of(p) for role, p in parts.items()} == \
        {role: config_of(rebuild(made)) for role, made in recipes.items()}
    # a Runner given no recipes says its parts are their own recipes, in the same format
    runner = Runner(evaluator.generator, evaluator.claim_judge, evaluator.relevance)
    assert runner.recipes["generator"] == Recipe.of_object("generator", evaluator.generator)
    assert build_parts(runner.recipes)["generator"] is evaluator.generator


def test_a_runner_rebuilds_from_its_recipes_as_a_worker_does() -> None:
    """An executor ships the runner's class and its recipes; the worker builds the parts with its own ``build``
    (rebuild by default) into that class, pipelined as on the driver."""
    evaluator = RagEvaluator(generator="extractive", conditions=["gold"], claim_judge="token-overlap")
    recipes = {role: travelled(made) for role, made in evaluator.recipes.items() if role != "judge"}
    runner = Runner.from_recipes(recipes, pipelined=False)
    assert type(runner) is Runner and runner.pipelined is False and runner.recipes == recipes
    assert {role: config_of(p) for role, p in runner.parts().items() if p is not None} == \
        {role: config_of(p) for role, p in build_parts(recipes).items() if p is not None}
    built: list[str] = []

    def build(made: Recipe) -> Any:
        built.append(made.kind)
        return rebuild(made)

    class MyRunner(Runner):
        pass

    assert type(MyRunner.from_recipes(recipes, build=build)) is MyRunner
    assert sorted(built) == sorted(recipes)


def test_a_registry_recipe_that_no_longer_fits_names_the_kind() -> None:
    from evret_core.contracts.errors import EvretError

    with pytest.raises(EvretError, match="judge 'token-overlap': bad options"):
        rebuild(Recipe("judge", "token-overlap", {"no_such_option": 1}))
