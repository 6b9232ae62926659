"""The one component builder (:func:`evret_core.plugins.builder.build`): what a factory is handed besides its options
(the dataset or the corpus being evaluated), where an option that does not fit was written, and that every path
building a component by name goes through it."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from evret_core import EvaluationDataset, EvretError, QueryExample, hookimpl
from evret_core.cli import build_parser
from evret_core.contracts import kinds
from evret_core.evaluation.config import EvaluateConfig
from evret_core.evaluation.evaluator import Evaluator
from evret_core.plugins import builder
from evret_core.plugins.builder import build, rebuild
from evret_core.plugins.loading import register_plugin
from evret_core.plugins.recipes import Recipe, recipe
from evret_core.plugins.registry import create
from evret_core.rag.rag_config import RagConfig

REPO = Path(__file__).resolve().parents[2]
RAG_EXAMPLE = REPO / "examples" / "rag"
DATASET = EvaluationDataset(queries=[QueryExample(query_id="q1", query_text="t", relevant_doc_ids=["a"])],
                            corpus={"a": {"text": "alpha"}})
CORPUS = {"b": {"text": "beta"}}


class Made:
    """What a factory was handed."""

    def __init__(self, **handed: Any) -> None:
        self.handed = handed

    def retrieve(self, query: str, k: int) -> list[Any]:
        return []


def takes_dataset(dataset: Any = None, boost: float = 1.0) -> Made:
    return Made(dataset=dataset)


def takes_corpus(corpus: Any = None, boost: float = 1.0) -> Made:
    return Made(corpus=corpus)


def takes_both(corpus: Any = None, dataset: Any = None) -> Made:
    return Made(corpus=corpus, dataset=dataset)


def takes_neither(boost: float = 1.0) -> Made:
    return Made(boost=boost)


def takes_anything(**options: Any) -> Made:
    return Made(**options)


def fails(boost: float = 1.0) -> Made:
    raise EvretError(f"boost {boost} is too much")


class Plugin:
    @hookimpl
    def register_retrievers(self, register):  # type: ignore[no-untyped-def]
        for factory in (takes_dataset, takes_corpus, takes_both, takes_neither, takes_anything, fails):
            register(factory.__name__.replace("_", "-"), factory)


@pytest.fixture(autouse=True)
def plugin() -> None:
    register_plugin(Plugin(), name="p")


NO_QUERIES = "a dataset with no queries over the corpus"
INJECTION = [
    # factory, options, what build is given, what the factory gets
    ("takes-dataset", {}, {"dataset": DATASET}, {"dataset": DATASET}),
    ("takes-dataset", {}, {"corpus": CORPUS}, {"dataset": NO_QUERIES}),
    ("takes-dataset", {"dataset": "mine"}, {"dataset": DATASET}, {"dataset": "mine"}),
    ("takes-dataset", {}, {}, {"dataset": None}),
    ("takes-corpus", {}, {"corpus": CORPUS}, {"corpus": CORPUS}),
    ("takes-corpus", {}, {"dataset": DATASET}, {"corpus": None}),
    ("takes-corpus", {"corpus": "corpus.jsonl"}, {"corpus": CORPUS}, {"corpus": "corpus.jsonl"}),
    ("takes-both", {}, {"dataset": DATASET}, {"corpus": None, "dataset": DATASET}),
    ("takes-both", {}, {"corpus": CORPUS}, {"corpus": CORPUS, "dataset": None}),
    ("takes-both", {"corpus": "corpus.jsonl"}, {"corpus": CORPUS}, {"corpus": "corpus.jsonl", "dataset": None}),
    ("takes-neither", {}, {"dataset": DATASET}, {"boost": 1.0}),
    ("takes-neither", {}, {"corpus": CORPUS}, {"boost": 1.0}),
    ("takes-anything", {"x": 1}, {"dataset": DATASET, "corpus": CORPUS}, {"x": 1}),
]


@pytest.mark.parametrize(("name", "options", "given", "expected"), INJECTION)
def test_what_a_factory_is_handed(name: str, options: dict[str, Any], given: dict[str, Any],
                                  expected: dict[str, Any]) -> None:
    made = build("retriever", name, options, **given)
    handed = dict(made.handed)
    if expected.get("dataset") == NO_QUERIES:
        wrapped = handed.pop("dataset")
        assert isinstance(wrapped, EvaluationDataset) and wrapped.queries == [] and wrapped.corpus == CORPUS
        expected = {k: v for k, v in expected.items() if k != "dataset"}
    assert handed == expected
    # the recipe holds what the factory was handed, so that a worker builds the same part
    assert recipe(made) == Recipe("retriever", name, {k: v for k, v in made.handed.items()
                                                      if k in options or v is not None and k in ("dataset", "corpus")})


def test_options_are_checked_with_where_they_were_written(tmp_path: Path) -> None:
    accepted = "accepted options: dataset, boost"
    with pytest.raises(EvretError) as caught:
        build("retriever", "takes-dataset", {"bost": 2}, sources={"bost": "--retriever-option"})
    assert str(caught.value) == ("retriever 'takes-dataset': option 'bost' (from --retriever-option) is not an option "
                                 f"of this retriever (did you mean boost?); {accepted}")
    with pytest.raises(EvretError, match=r"option 'bost' \(from Python\) is not an option"):
        build("retriever", "takes-dataset", {"bost": 2}, sources={})  # an option without a source: Python
    with pytest.raises(EvretError, match=r"^retriever 'takes-dataset': bad options \(.*'bost'.*\); " + accepted):
        build("retriever", "takes-dataset", {"bost": 2})  # no sources: the registry's own check
    assert build("retriever", "takes-anything", {"bost": 2}, sources={}).handed == {"bost": 2}  # **options: all
    with pytest.raises(EvretError, match=r"^boost 2 is too much \(options from eval.toml \[retriever\]\)$"):
        build("retriever", "fails", {"boost": 2}, sources={"boost": "eval.toml [retriever]"})
    with pytest.raises(EvretError, match=r"^boost 1.0 is too much$"):
        build("retriever", "fails", {}, sources={})  # no option given: nothing to say where it came from


def evaluate_args(*argv: str) -> argparse.Namespace:
    args = build_parser().parse_args(["evaluate", "--dataset", "data.jsonl", "--metric", "recall@1", *argv])
    assert isinstance(args, argparse.Namespace)
    return args


def test_option_sources_in_errors_file_flag_and_python(tmp_path: Path) -> None:
    toml = tmp_path / "eval.toml"
    toml.write_text('[retriever]\nname = "takes-neither"\nbost = 2\n', encoding="utf-8")
    message = "retriever 'takes-neither': option 'bost' (from {}) is not an option of this retriever (did you " \
              "mean boost?); accepted options: boost"
    file_config = EvaluateConfig.from_args(evaluate_args("--config", str(toml)))
    flag_config = EvaluateConfig.from_args(evaluate_args("--retriever", "takes-neither", "--retriever-option",
                                                         "bost=2"))
    python_config = EvaluateConfig(dataset="data.jsonl", metrics=["recall@1"],
                                   retriever={"name": "takes-neither", "bost": 2})
    for config, source in ((file_config, f"{toml} [retriever]"), (flag_config, "--retriever-option"),
                           (python_config, "Python")):
        with pytest.raises(EvretError) as caught:
            config.build_evaluator(DATASET)
        assert str(caught.value) == message.format(source)


def test_every_path_that_builds_by_name_goes_through_the_builder(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, str]] = []
    real = builder.build

    def spy(kind: Any, name: str, options: Any, **given: Any) -> Any:
        calls.append((kind if isinstance(kind, str) else kind.name, name))
        return real(kind, name, options, **given)

    monkeypatch.setattr(builder, "build", spy)

    EvaluateConfig(dataset="data.jsonl", metrics=["recall@1"], retriever="takes-dataset",
                   judge="exact").build_evaluator(DATASET)
    assert ("retriever", "takes-dataset") in calls and ("judge", "exact") in calls

    calls.clear()
    config = RagConfig(dataset=str(RAG_EXAMPLE / "questions.jsonl"), corpus=str(RAG_EXAMPLE / "corpus.jsonl"),
                       generator="extractive", retriever="takes-corpus", answer_judge="exact",
                       retrieval_judge="token-overlap")
    assert config.build_evaluator(config.load_questions()).retriever.handed["corpus"]
    assert {("retriever", "takes-corpus"), ("judge", "exact"), ("judge", "token-overlap")} <= set(calls)

    calls.clear()
    Evaluator(lambda q, k: [], metrics=["recall@1"], judge="token-overlap", judge_options={"min_tokens": 1})
    assert calls == [("metric", "recall"), ("judge", "token-overlap"), ("executor", "local")]

    calls.clear()
    create(kinds.JUDGE, "exact")
    assert calls == [("judge", "exact")]

    calls.clear()
    rebuild(Recipe("judge", "contains", {}))
    assert calls == [("judge", "contains")]
