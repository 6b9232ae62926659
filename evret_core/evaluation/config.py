"""``EvaluateConfig``: the settings of a retrieval evaluation, one typed model for the CLI, TOML files and Python.

A TOML file (``evret evaluate --config eval.toml``) holds the same keys as the model; ``retriever`` and ``judge``
are a name or a table with ``name`` and the component's options::

    dataset = "dataset.jsonl"          # relative paths are relative to the file
    metrics = ["recall@5", "ndcg@10"]
    [retriever]
    name = "bm25"
    corpus = "corpus.jsonl"
    [judge]
    name = "token-overlap"
    min_tokens = 2

In Python::

    from evret_core.evaluation.config import EvaluateConfig
    results = EvaluateConfig(dataset="data.jsonl", retriever="bm25", metrics=["recall@5"]).evaluate()

Options belong to the component they were written for: a command line that names another judge than the file's
(``--judge llm``) drops the file's judge options, and an option the component does not take is reported with
where it came from (the file's ``[judge]`` table or ``--judge-option``). Every number is bounded
(:mod:`evret_core.limits`) and errors name the file or flag and the option.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import field_validator

from evret_core.contracts import kinds
from evret_core.contracts.errors import EvretError
from evret_core.io.datasets import EvaluationDataset
from evret_core.io.run_config import (
    PATH_OPTION_SUFFIXES,
    ComponentSpec,
    Config,
    component_layer,
    int_in,
    load_toml,
)
from evret_core.limits import MAX_DEPTH, MAX_RESAMPLES, MAX_SEED, MAX_SLICE_SIZE
from evret_core.plugins import builder
from evret_core.results.evaluation import EvaluationResults

if TYPE_CHECKING:
    from evret_core.evaluation.evaluator import Evaluator

__all__ = ["PATH_OPTION_SUFFIXES", "ComponentSpec", "EvaluateConfig", "PipelineConfig", "component_layer",
           "file_settings", "load_toml"]

FLAGS = {"dataset": "--dataset", "retriever": "--retriever", "judge": "--judge", "metrics": "--metric",
         "matching": "--matching", "k": "-k", "output": "--output", "fail_on_unmeasured": "--fail-on-unmeasured",
         "missing_queries": "--missing-queries",
         "confidence_level": "--confidence-level", "n_resamples": "--resamples", "seed": "--seed",
         "min_slice_size": "--min-slice-size", "relevance_level": "--relevance-level"}
"""Each setting's command-line flag."""


class EvaluateConfig(Config):
    """Everything ``evret evaluate`` needs; see the module docs. ``judge`` None means the default judge
    (contains) for text-labelled queries."""

    PATHS: ClassVar[tuple[str, ...]] = ("dataset", "output")
    COMPONENTS: ClassVar[tuple[str, ...]] = ("retriever", "judge", "executor")
    FLAGS: ClassVar[dict[str, str]] = FLAGS
    REQUIRED: ClassVar[tuple[str, ...]] = ("dataset", "retriever", "metrics")

    dataset: str
    retriever: ComponentSpec
    metrics: list[str]
    judge: ComponentSpec | None = None
    executor: ComponentSpec | None = None
    matching: Literal["first_match", "any_match"] = "first_match"
    k: int | None = None
    output: str | None = None
    fail_on_unmeasured: bool = False
    missing_queries: Literal["error", "zero"] = "error"
    confidence_level: float = 0.95
    n_resamples: int = 1000
    seed: int = 0
    min_slice_size: int = 10
    #: binary measures count a grade >= this as relevant (``evret trec -l``); None: grade > 0, or the cut of a
    #: graded judge that needs no expected answer when it grades the queries without labels
    relevance_level: float | None = None

    _check_k = field_validator("k", mode="before")(int_in(1, MAX_DEPTH))
    _check_resamples = field_validator("n_resamples", mode="before")(int_in(1, MAX_RESAMPLES))
    _check_seed = field_validator("seed", mode="before")(int_in(0, MAX_SEED))
    _check_slices = field_validator("min_slice_size", mode="before")(int_in(0, MAX_SLICE_SIZE))

    @field_validator("dataset", "output", mode="before")
    @classmethod
    def _path(cls, value: Any) -> Any:
        if isinstance(value, Path):
            value = str(value)
        if isinstance(value, str) and not value.strip():
            raise ValueError("the path is empty")
        return value

    @field_validator("metrics", mode="before")
    @classmethod
    def _metric_names(cls, value: Any) -> Any:
        from evret_core.plugins.registry import parse_metric_spec

        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not value or not all(isinstance(m, str) for m in value):
            raise ValueError("must be a non-empty list of names such as ['ndcg@10']")
        for name in value:
            try:
                parse_metric_spec(name)
            except EvretError as exc:
                raise ValueError(str(exc)) from None
        return value

    @field_validator("fail_on_unmeasured", mode="before")
    @classmethod
    def _strict_bool(cls, value: Any) -> Any:
        if not isinstance(value, bool):
            raise ValueError(f"must be true or false, got {value!r}")
        return value

    @field_validator("relevance_level", mode="before")
    @classmethod
    def _relevance_level(cls, value: Any) -> Any:
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not math.isfinite(value)):
            raise ValueError(f"must be a number (a grade, e.g. 2), got {value!r}")
        return value

    @field_validator("confidence_level", mode="before")
    @classmethod
    def _level(cls, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or not 0 < value < 1:
            raise ValueError(f"must be a number between 0 and 1 (exclusive), e.g. 0.95, got {value!r}")
        return value

    # -- the command line --------------------------------------------------------------------------------------
    @classmethod
    def flag_value(cls, args: Any, key: str) -> Any:
        """As :meth:`Config.flag_value`; ``--metric`` is repeated, one metric each."""
        return getattr(args, "metric" if key == "metrics" else key, None)

    @classmethod
    def layer_args(cls, args: Any, data: dict[str, Any], sources: dict[str, str],
                   option_sources: dict[str, dict[str, str]]) -> None:
        """``--run FILE [--corpus CORPUS]``: the built-in retriever ``run`` instead of ``--retriever``."""
        if args.corpus and not args.run:
            raise EvretError("--corpus goes with --run (the texts of a run file's documents)")
        if args.run:
            if args.retriever or args.retriever_option:
                raise EvretError("give --run (retrieved results from a file) or --retriever, not both")
            data["retriever"] = {"name": "run", "options": {"path": args.run,
                                                            **({"corpus": args.corpus} if args.corpus else {})}}
            sources["retriever"] = "--run"
            option_sources["retriever"] = {"path": "--run", "corpus": "--corpus"}

    @classmethod
    def default_component(cls, kind: str) -> str | None:
        """``--judge-option`` alone goes to the default judge, ``--executor-option`` to the local executor."""
        from evret_core.judge.resolve import DEFAULT_JUDGE

        return {"judge": DEFAULT_JUDGE, "executor": "local"}.get(kind)

    # -- building --------------------------------------------------------------------------------------------
    def input_files(self) -> list[str]:
        """The files this run reads (dataset, and component options naming existing files): never an output."""
        from evret_core.io.outputs import files_named

        files = [self.dataset]
        if Path(self.dataset).is_dir():  # a BEIR folder: its corpus, queries and qrels
            files += [str(p) for p in sorted(Path(self.dataset).rglob("*")) if p.is_file()]
        return files + files_named(spec.options for spec in (self.retriever, self.judge) if spec)

    def check_output(self, inputs: list[str] | None = None) -> None:
        """Fail now, before any work, when ``output`` cannot be written (see :mod:`evret_core.io.outputs`)."""
        from evret_core.io.outputs import check_outputs

        check_outputs({"--output": self.output or None}, inputs=[*self.input_files(), *(inputs or [])])

    def load_dataset(self) -> EvaluationDataset:
        return EvaluationDataset.load(self.dataset)

    def build_judge(self) -> Any:
        """The judge object, or None for the evaluator's default."""
        if self.judge is None:
            return None
        return builder.build(kinds.JUDGE, self.judge.name, self.judge.options, sources=self.judge.sources())

    def build_evaluator(self, dataset: EvaluationDataset,
                        progress: Callable[[str, int, int], None] | None = None) -> Evaluator:
        """The retriever (handed ``dataset`` when its factory takes one), the judge and the evaluator."""
        from evret_core.evaluation.evaluator import Evaluator

        spec = self.retriever
        retriever = builder.build(kinds.RETRIEVER, spec.name, spec.options, sources=spec.sources(), dataset=dataset)
        return Evaluator(
            retriever=retriever, metrics=self.metrics, judge=self.build_judge(), matching=self.matching, k=self.k,
            fail_on_unmeasured=self.fail_on_unmeasured, missing_queries=self.missing_queries, progress=progress,
            executor=self.executor.name if self.executor else None,
            executor_options=dict(self.executor.options) if self.executor else None,
            confidence_level=self.confidence_level,
            n_resamples=self.n_resamples, seed=self.seed, min_slice_size=self.min_slice_size,
            relevance_level=self.relevance_level,
        )

    def evaluate(self, progress: Callable[[str, int, int], None] | None = None) -> EvaluationResults:
        """Check the output path, load the dataset, evaluate, and write ``output`` when it is set."""
        self.check_output()
        dataset = self.load_dataset()
        evaluator = self.build_evaluator(dataset, progress)
        evaluator.check_labels(dataset, source=self.dataset)  # queries without labels: refused here, naming the file
        results = evaluator.evaluate(dataset)
        if self.output:
            results.to_json(self.output)
        return results


class PipelineConfig(EvaluateConfig):
    """``evret evaluate``'s settings for a pipeline of stages (:mod:`evret_core.evaluation.stages`): the same
    settings with the ``[pipeline]`` table (checked by :func:`~evret_core.evaluation.stages.parse_pipeline`, which
    names the file, stage and key) in place of ``retriever``, or a ``--pipeline`` file."""

    COMPONENTS: ClassVar[tuple[str, ...]] = ("judge", "executor")
    FLAGS: ClassVar[dict[str, str]] = {key: flag for key, flag in FLAGS.items() if key != "retriever"}
    REQUIRED: ClassVar[tuple[str, ...]] = ("dataset", "metrics")

    retriever: ComponentSpec | None = None  # type: ignore[assignment]
    pipeline: dict[str, Any] | None = None

    @field_validator("retriever", mode="before")
    @classmethod
    def _no_retriever(cls, value: Any) -> Any:
        if value is not None:
            raise ValueError("a pipeline's retrievers are its stages: drop the [retriever] table (or the [pipeline])")
        return value

    @classmethod
    def layer_args(cls, args: Any, data: dict[str, Any], sources: dict[str, str],
                   option_sources: dict[str, dict[str, str]]) -> None:
        """``--retriever``, ``--retriever-option`` and ``--run`` name what a pipeline's stages are: refused."""
        for flag, given in (("--retriever", args.retriever), ("--retriever-option", args.retriever_option),
                            ("--run", args.run), ("--corpus", args.corpus)):
            if given:
                raise EvretError(f"{flag} goes without a pipeline: a pipeline's retrievers are its stages")


def file_settings(raw: Mapping[str, Any], path: str | Path) -> tuple[dict[str, Any], dict[str, dict[str, str]]]:
    """An ``evret evaluate`` config file's settings with paths made relative to the file, and per component the
    source of each option (``"eval.toml [judge]"``): :meth:`~evret_core.io.run_config.Config.file_settings`."""
    return EvaluateConfig.file_settings(raw, path)
