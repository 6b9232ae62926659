"""A pipeline of stages evaluated in one run: first-stage retrievers -> fusion -> reranker -> packing.

A pipeline is an ordered list of named stages (``[[pipeline.stages]]`` in an ``evret evaluate`` config file, or a
``--pipeline`` file). Each stage is exactly one of:

- ``retriever``: any registered retriever (a name or ``{name, options}``), asked once for its top ``depth``;
- ``fuse``: the rankings of two or more earlier stages fused (:mod:`evret_core.retrieve.fusion`: ``method``,
  ``norm``, ``rrf_k``, ``weights``), cut to ``depth``;
- ``reranker``: any registered reranker over the top ``depth`` of its ``input`` (the stage before, by default);
- ``pack``: its ``input``'s ranking packed into a token budget (:mod:`evret_core.retrieve.packing`, ``tokenizer``).

Every stage's ranking is made once per query from the rankings it reads (nothing is retrieved twice), and every
stage is scored on the same judgments: the judgment contexts of all stages are planned together and each distinct
one is judged once (:class:`AnsweredJudge` then answers each stage's evaluation from those verdicts). Each stage's
results are exactly what :class:`~evret_core.evaluation.evaluator.Evaluator` gives for its ranking alone; each edge
(a stage over each stage it reads) is compared with the paired tests of ``evret compare``
(:func:`~evret_core.statistics.inference.compare_scores`), Holm-corrected over every (edge, metric) of the pipeline,
with a paired bootstrap interval of the difference (:func:`~evret_core.statistics.inference.bootstrap_intervals`).
Every option is checked before anything is built (building a retriever may index or encode a corpus).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from evret_core.contracts import kinds
from evret_core.contracts.errors import EvretError, did_you_mean
from evret_core.contracts.executor import batch_retrieve
from evret_core.contracts.judge import Judge, JudgmentContext
from evret_core.contracts.retrieve import RankedColumns, RetrievalResult, coerce_results
from evret_core.evaluation.evaluator import Evaluator
from evret_core.io.datasets import EvaluationDataset
from evret_core.io.run_config import load_toml
from evret_core.judge.resolve import resolve_judge
from evret_core.limits import MAX_DEPTH, check_int
from evret_core.plugins.builder import build, check_options
from evret_core.results.evaluation import EvaluationResults
from evret_core.retrieve.fusion import FusionSettings, fuse_columns
from evret_core.retrieve.packing import pack, token_counter
from evret_core.statistics.inference import TESTS, bootstrap_intervals, compare_scores, holm_bonferroni

__all__ = ["KINDS", "AnsweredJudge", "PipelineResults", "StageSpec", "evaluate_pipeline", "parse_pipeline",
           "read_pipeline_file"]

KINDS = ("retriever", "fuse", "reranker", "pack")
"""The stage kinds, each named by the key that makes a stage of it."""

_KEYS = {
    "retriever": ("name", "retriever", "depth"),
    "fuse": ("name", "fuse", "method", "norm", "rrf_k", "weights", "depth"),
    "reranker": ("name", "reranker", "input", "depth"),
    "pack": ("name", "pack", "input", "tokenizer"),
}
_PIPELINE_KEYS = ("stages", "test", "alpha", "top")
DEFAULT_RERANK_DEPTH = 100
_PATH_SUFFIXES = ("corpus", "path", "file", "dir")


@dataclass(frozen=True)
class StageSpec:
    """One checked stage: its ``name``, ``kind`` (one of :data:`KINDS`), the stages it reads (``inputs``), its
    component (``(registered name, options)`` of a retriever or reranker), ``depth``, fusion settings, packing
    budget and tokenizer, and ``where`` (the table it was written in, for messages)."""

    name: str
    kind: str
    inputs: tuple[str, ...] = ()
    component: tuple[str, dict[str, Any]] | None = None
    depth: int | None = None
    fusion: FusionSettings | None = None
    budget: int | None = None
    tokenizer: str | None = None
    where: str = ""

    def config(self) -> dict[str, Any]:
        """The stage's settings as written (JSON data)."""
        out: dict[str, Any] = {"name": self.name, "kind": self.kind, "inputs": list(self.inputs)}
        if self.component is not None:
            out[self.kind] = {"name": self.component[0], "options": dict(self.component[1])}
        if self.depth is not None:
            out["depth"] = self.depth
        if self.fusion is not None:
            out.update(method=self.fusion.method, norm=self.fusion.norm, rrf_k=self.fusion.rrf_k,
                       weights=list(self.fusion.weights) if self.fusion.weights else None)
        if self.kind == "pack":
            out.update(budget=self.budget, tokenizer=self.tokenizer or "chars")
        return out


@dataclass(frozen=True)
class PipelineSettings:
    """The pipeline table's own options: the paired ``test``, ``alpha`` after Holm's correction, and ``top``
    (how many queries each stage helped and hurt most are listed)."""

    stages: tuple[StageSpec, ...]
    test: str = "t"
    alpha: float = 0.05
    top: int = 5


def _component(value: Any, key: str, where: str) -> tuple[str, dict[str, Any]]:
    if isinstance(value, str) and value.strip():
        return value, {}
    if isinstance(value, Mapping) and isinstance(value.get("name"), str) and value["name"].strip():
        extra = sorted(set(value) - {"name", "options"})
        if extra:
            raise EvretError(f"{where}: option {key!r} is a table {{name, options}}; it has "
                             f"{', '.join(map(repr, extra))} too (put the {key}'s options under 'options')")
        options = value.get("options", {})
        if not isinstance(options, Mapping):
            raise EvretError(f"{where}: option '{key}.options' must be a table, got {options!r}")
        return value["name"], dict(options)
    raise EvretError(f"{where}: option {key!r} must name a registered {key} or be a table "
                     f"{{name = ..., options = {{...}}}}, got {value!r}")


def _relative(base: Path | None, options: dict[str, Any]) -> dict[str, Any]:
    """A component's file-naming options relative to the config file's folder ``base``."""
    if base is None:
        return options
    return {key: (str(base / value) if key.endswith(_PATH_SUFFIXES) and isinstance(value, str) and value
                  and not Path(value).is_absolute() else value) for key, value in options.items()}


def _earlier(value: Any, key: str, where: str, names: Sequence[str]) -> str:
    """``value`` when it names one of the earlier stages ``names``."""
    if not isinstance(value, str) or value not in names:
        raise EvretError(f"{where}: option {key!r} must name an earlier stage, got {value!r}"
                         f"{did_you_mean(str(value), names)}; earlier stages: {', '.join(names)}")
    return value


def parse_pipeline(raw: Any, source: str, base: Path | None = None) -> PipelineSettings:
    """The pipeline table ``raw`` checked, every stage and option, with errors naming ``source`` (``eval.toml
    [pipeline]``), the stage and the key. Registered names and component options are checked against the registry
    (with a did-you-mean); nothing is built. ``base``: the folder relative paths are read from."""
    if not isinstance(raw, Mapping):
        raise EvretError(f"{source}: must be a table with a list of stages ([[pipeline.stages]])")
    unknown = [key for key in raw if key not in _PIPELINE_KEYS]
    if unknown:
        raise EvretError(f"{source}: unknown key {unknown[0]!r}{did_you_mean(unknown[0], _PIPELINE_KEYS)}; "
                         f"the pipeline table takes {', '.join(_PIPELINE_KEYS)}")
    test = raw.get("test", "t")
    if test not in TESTS:
        raise EvretError(f"{source}: option 'test' must be one of {', '.join(TESTS)}, got {test!r}"
                         f"{did_you_mean(str(test), TESTS)}")
    alpha = raw.get("alpha", 0.05)
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0 < alpha < 1:
        raise EvretError(f"{source}: option 'alpha' must be a number between 0 and 1, got {alpha!r}")
    top = check_int(raw.get("top", 5), f"{source}: option 'top'", 0, 1000)
    stages_raw = raw.get("stages")
    if not isinstance(stages_raw, list) or not stages_raw:
        raise EvretError(f"{source}: option 'stages' must be a non-empty list of stage tables "
                         f"([[pipeline.stages]] with a name and one of {', '.join(KINDS)})")
    stages: list[StageSpec] = []
    names: list[str] = []
    for i, table in enumerate(stages_raw):
        where = f"{source} stages[{i}]"
        if not isinstance(table, Mapping):
            raise EvretError(f"{where}: must be a table with a name and one of {', '.join(KINDS)}, got {table!r}")
        name = table.get("name")
        if not isinstance(name, str) or not name.strip():
            raise EvretError(f"{where}: option 'name' is missing or empty (each stage is named, e.g. name = \"bm25\")")
        where = f"{where} ({name!r})"
        if name in names:
            raise EvretError(f"{where}: two stages are named {name!r}")
        kinds_given = [kind for kind in KINDS if kind in table]
        if len(kinds_given) != 1:
            typo = next((key for key in table if key not in ("name", *sum(_KEYS.values(), ()))), None)
            hint = f" (unknown key {typo!r}{did_you_mean(typo, KINDS)})" if typo else ""
            raise EvretError(f"{where}: a stage has exactly one of the keys {', '.join(KINDS)}, got "
                             f"{', '.join(kinds_given) or 'none'}{hint}")
        kind = kinds_given[0]
        unknown = [key for key in table if key not in _KEYS[kind]]
        if unknown:
            raise EvretError(f"{where}: unknown key {unknown[0]!r}{did_you_mean(unknown[0], _KEYS[kind])}; a "
                             f"{kind} stage takes {', '.join(_KEYS[kind])}")
        if i == 0 and kind != "retriever":
            raise EvretError(f"{where}: the first stage must be a retriever (the others read earlier stages)")
        depth = table.get("depth")
        if depth is not None:
            depth = check_int(depth, f"{where}: option 'depth'", 1, MAX_DEPTH)
        def earlier(value: Any, key: str, where: str = where) -> str:
            return _earlier(value, key, where, names)

        if kind == "retriever":
            component = _component(table["retriever"], "retriever", where)
            if component[0] == "run":
                raise EvretError(f"{where}: the retriever 'run' answers by query id from a file; a pipeline's "
                                 f"stages read query texts (give a retriever that takes queries)")
            options = _relative(base, component[1])
            check_options(kinds.RETRIEVER, component[0], options, dict.fromkeys(options, f"{where} options"))
            stage = StageSpec(name, kind, (), (component[0], options), depth, where=where)
        elif kind == "fuse":
            given = table["fuse"]
            if not isinstance(given, list) or len(given) < 2:
                raise EvretError(f"{where}: option 'fuse' must list two or more earlier stages, got {given!r}")
            inputs = tuple(earlier(value, "fuse") for value in given)
            if len(set(inputs)) != len(inputs):
                raise EvretError(f"{where}: option 'fuse' names a stage twice: {list(inputs)}")
            settings = FusionSettings.check(table.get("method", "rrf"), table.get("norm", "min-max"),
                                            table.get("weights"), table.get("rrf_k", 60), n_runs=len(inputs),
                                            where=where)
            stage = StageSpec(name, kind, inputs, None, depth, settings, where=where)
        elif kind == "reranker":
            component = _component(table["reranker"], "reranker", where)
            options = _relative(base, component[1])
            check_options(kinds.RERANKER, component[0], options, dict.fromkeys(options, f"{where} options"))
            source_stage = earlier(table.get("input", names[-1]), "input")
            stage = StageSpec(name, kind, (source_stage,), (component[0], options),
                              depth if depth is not None else DEFAULT_RERANK_DEPTH, where=where)
        else:
            budget = table["pack"]
            if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
                raise EvretError(f"{where}: option 'pack' is the token budget, an integer >= 1, got {budget!r}")
            tokenizer = table.get("tokenizer")
            if tokenizer is not None and (not isinstance(tokenizer, str) or not tokenizer.strip()):
                raise EvretError(f"{where}: option 'tokenizer' must be \"chars\" or a local tokenizer folder, "
                                 f"got {tokenizer!r}")
            if tokenizer not in (None, "chars") and base is not None and not Path(tokenizer).is_absolute():
                tokenizer = str(base / tokenizer)
            source_stage = earlier(table.get("input", names[-1]), "input")
            stage = StageSpec(name, kind, (source_stage,), None, None, budget=budget, tokenizer=tokenizer,
                              where=where)
        stages.append(stage)
        names.append(name)
    return PipelineSettings(tuple(stages), test=test, alpha=float(alpha), top=top)


def read_pipeline_file(path: str | Path) -> PipelineSettings:
    """A ``--pipeline`` file: a TOML file of ``[[stages]]`` (and ``test``, ``alpha``, ``top``), or one holding a
    ``[pipeline]`` table; paths in it are relative to it."""
    raw = load_toml(path)
    if "pipeline" in raw and "stages" not in raw:
        extra = sorted(set(raw) - {"pipeline"})
        if extra:
            raise EvretError(f"{path}: a --pipeline file holds the pipeline only, found {', '.join(extra)} too "
                             f"(give the other settings in --config or as flags)")
        return parse_pipeline(raw["pipeline"], f"{path} [pipeline]", Path(path).parent)
    return parse_pipeline(raw, str(path), Path(path).parent)


class AnsweredJudge(Judge):
    """A judge that answers from verdicts (and grades) already made for every context a pipeline planned: each
    stage's evaluation asks it, so the real judge saw each distinct context once. Its name, scale and ``config()``
    are the real judge's, and ``stats()`` the cost of the one run that judged them."""

    def __init__(self, judge: Any, verdicts: Mapping[JudgmentContext, bool | None],
                 grades: Mapping[JudgmentContext, float | None] | None, stats: dict[str, Any] | None) -> None:
        self.inner = judge
        self.name = getattr(judge, "name", type(judge).__name__)
        self.threshold = getattr(judge, "threshold", None)
        self.reference_free = bool(getattr(judge, "reference_free", False))
        self.grades = getattr(judge, "grades", None)
        self.cut = getattr(judge, "cut", None)
        self._verdicts = verdicts
        self._grades = grades or {}
        self._stats = stats

    def judge(self, context: JudgmentContext) -> bool:
        return bool(self._verdicts[context])

    def batch_judge(self, contexts: Sequence[JudgmentContext]) -> list[bool | None]:
        return [self._verdicts[c] for c in contexts]

    def batch_grade(self, contexts: Sequence[JudgmentContext]) -> list[float | None]:
        return [self._grades[c] for c in contexts]

    def stats(self) -> dict[str, Any]:
        return dict(self._stats or {})

    def config(self) -> dict[str, Any]:
        config = getattr(self.inner, "config", None)
        return dict(config()) if callable(config) else {"name": self.name}


@dataclass
class PipelineResults:
    """A pipeline's run: each stage's :class:`EvaluationResults` (``stages``, in order), the comparisons of each
    stage over each stage it reads, what packing kept, and what judging cost. :meth:`to_dict` is the JSON that
    ``evret evaluate --output`` writes and every report renders."""

    specs: list[StageSpec]
    stages: dict[str, EvaluationResults]
    comparisons: list[dict[str, Any]]
    packing: dict[str, dict[str, Any]]
    judging: dict[str, Any]
    settings: dict[str, Any]
    timing: dict[str, float] = field(default_factory=dict)

    def to_dict(self, per_query: bool = True) -> dict[str, Any]:
        """The JSON data: settings, stages (config, scores, intervals, and with ``per_query`` each query's values
        in the metrics' order), comparisons, packing and judging."""
        stages = []
        for spec in self.specs:
            results = self.stages[spec.name]
            entry: dict[str, Any] = {**spec.config(), "scores": dict(results.scores),
                                     "intervals": {m: list(v) for m, v in results.intervals.items()},
                                     "num_queries": len(results.per_query)}
            if per_query:
                entry["per_query"] = {qid: [scores[m] for m in results.metrics]
                                      for qid, scores in results.per_query_scores().items()}
            stages.append(entry)
        return {"schema": "pipeline", "schema_version": 1, "settings": self.settings, "stages": stages,
                "comparisons": self.comparisons, "packing": self.packing, "judging": self.judging,
                "timing": self.timing}


def _first_stage(retriever: Any, texts: list[str], depth: int, where: str,
                 progress: Callable[[str, int, int], None] | None, batch_size: int = 256) -> list[RankedColumns]:
    """``retriever``'s top ``depth`` for every query text, as columns."""
    out: list[RankedColumns] = []
    if progress is not None:
        progress(f"retrieve {where}", 0, len(texts))
    for start in range(0, len(texts), batch_size):
        chunk = texts[start:start + batch_size]
        got = batch_retrieve(retriever, chunk, depth)
        if len(got) != len(chunk):
            raise EvretError(f"stage {where!r}: the retriever returned {len(got)} rankings for {len(chunk)} queries")
        out.extend((g if isinstance(g, RankedColumns) else RankedColumns.from_results(
            coerce_results(g, f"stage {where!r}"))).head(depth) for g in got)
        if progress is not None:
            progress(f"retrieve {where}", len(out), len(texts))
    return out


def _texts(ids: Any, rankings: Sequence[RankedColumns]) -> list[str | None] | None:
    """Each fused id's text from the first ranking that has one (as the hybrid retriever gives it)."""
    if all(r.texts is None for r in rankings):
        return None
    found: dict[Any, str | None] = {}
    for ranking in reversed(rankings):
        if ranking.texts is not None:
            found.update((d, t) for d, t in zip(ranking.ids, ranking.texts, strict=True) if t is not None)
    return [found.get(d) for d in ids]


def run_stages(settings: PipelineSettings, dataset: EvaluationDataset, k: int,
               progress: Callable[[str, int, int], None] | None = None,
               timing: dict[str, float] | None = None) -> dict[str, list[RankedColumns]]:
    """Every stage's ranking of every query of ``dataset``, each made once: tokenizers and rerankers are built
    first (cheap: a bad one fails before a retriever indexes anything), then the retrievers (each handed the
    dataset), then the stages in order. A retriever stage and a fusion stage keep ``depth`` documents (default
    ``k``)."""
    counters = {}
    for spec in settings.stages:
        if spec.kind == "pack":
            try:
                counters[spec.name] = token_counter(spec.tokenizer)
            except EvretError as exc:
                raise EvretError(f"{spec.where}: {exc}") from None
    rerankers = {spec.name: build(kinds.RERANKER, spec.component[0], spec.component[1],
                                  sources=dict.fromkeys(spec.component[1], f"{spec.where} options"))
                 for spec in settings.stages if spec.kind == "reranker" and spec.component is not None}
    retrievers = {spec.name: build(kinds.RETRIEVER, spec.component[0], spec.component[1],
                                   sources=dict.fromkeys(spec.component[1], f"{spec.where} options"), dataset=dataset)
                  for spec in settings.stages if spec.kind == "retriever" and spec.component is not None}
    texts = [q.query_text for q in dataset.queries]
    rankings: dict[str, list[RankedColumns]] = {}
    for spec in settings.stages:
        started = time.perf_counter()
        if spec.kind == "retriever":
            rankings[spec.name] = _first_stage(retrievers[spec.name], texts, spec.depth or k, spec.name, progress)
        elif spec.kind == "fuse":
            assert spec.fusion is not None
            runs = [rankings[name] for name in spec.inputs]
            fused = fuse_columns(runs, spec.fusion)
            depth = spec.depth or k
            rankings[spec.name] = [
                RankedColumns(ids[:depth].tolist(), scores[:depth], _texts(ids[:depth], [run[q] for run in runs]))
                for q, (ids, scores) in enumerate(fused)]
        elif spec.kind == "reranker":
            assert spec.depth is not None
            candidates = [r.head(spec.depth) for r in rankings[spec.inputs[0]]]
            if progress is not None:
                progress(f"rerank {spec.name}", 0, len(texts))
            rankings[spec.name] = list(rerankers[spec.name].batch_rerank_columns(texts, candidates, spec.depth))
            if progress is not None:
                progress(f"rerank {spec.name}", len(texts), len(texts))
        else:
            assert spec.budget is not None
            count = counters[spec.name]
            packed = []
            for q, ranking in enumerate(rankings[spec.inputs[0]]):
                if ranking.texts is None or any(t is None for t in ranking.texts):
                    raise EvretError(f"{spec.where}: packing reads texts, and stage {spec.inputs[0]!r} gave none "
                                     f"for query {dataset.queries[q].query_id!r}")
                kept: list[RetrievalResult] = pack(ranking.to_results(), spec.budget, count)
                packed.append(RankedColumns.from_results(kept))
            rankings[spec.name] = packed
        if timing is not None:
            timing[spec.name] = time.perf_counter() - started
    return rankings


def evaluate_pipeline(
    settings: PipelineSettings,
    dataset: EvaluationDataset,
    metrics: Sequence[str],
    judge: Any = None,
    progress: Callable[[str, int, int], None] | None = None,
    rankings: Mapping[str, list[RankedColumns]] | None = None,
    **evaluator_options: Any,
) -> PipelineResults:
    """Run the pipeline's stages on ``dataset`` (or take ``rankings`` already made, stage name -> one ranking per
    query) and evaluate every stage with ``metrics`` on the same judgments (``judge``: an object, a registered name,
    or None for the evaluator's default; each distinct context is judged once). ``evaluator_options`` go to every
    stage's :class:`~evret_core.evaluation.evaluator.Evaluator` (``k``, ``matching``, ``confidence_level``,
    ``n_resamples``, ``seed``...)."""
    started = time.perf_counter()
    probe = Evaluator(retriever={}, metrics=metrics, judge=judge, **evaluator_options)  # checks every setting
    graded = probe.check_labels(dataset)  # queries without labels: refused before retrieving
    timing: dict[str, float] = {}
    if rankings is None:
        rankings = run_stages(settings, dataset, probe.k, progress, timing)
    retrieved = time.perf_counter()
    qids = [q.query_id for q in dataset.queries]
    runs = {name: dict(zip(qids, columns, strict=True)) for name, columns in rankings.items()}
    # plan the judgments of every stage together: each distinct context is judged once
    union: dict[JudgmentContext, None] = {}
    per_stage_contexts = 0
    for spec in settings.stages:
        stage = Evaluator(retriever=runs[spec.name], metrics=metrics, judge=probe.judge, **evaluator_options)
        planned = stage.plan_judgments(dataset, stage.retrieve_rows(dataset))
        per_stage_contexts += len(planned)
        union.update(dict.fromkeys(planned))
    contexts = list(union)
    if probe.judge is None and contexts:
        probe.judge = resolve_judge()
    if progress is not None:
        probe.progress = progress
    answered: Any = probe.judge
    if probe.judge is not None:
        if graded:
            run = probe._grade(contexts)
            grades = dict(zip(contexts, run.grades or [], strict=True))
        else:
            run = probe._judge(contexts)
            grades = None
        answered = AnsweredJudge(probe.judge, dict(zip(contexts, run.verdicts, strict=True)), grades, run.stats)
    judged = time.perf_counter()
    stages: dict[str, EvaluationResults] = {}
    for spec in settings.stages:
        evaluator = Evaluator(retriever=runs[spec.name], metrics=metrics, judge=answered, **evaluator_options)
        stages[spec.name] = evaluator.evaluate(dataset)
    scored = time.perf_counter()
    comparisons = compare_stages(settings, stages, probe.confidence_level, probe.n_resamples, probe.seed)
    packing = _packing(settings, stages, rankings)
    judging = {"distinct_contexts": len(contexts), "planned_by_stages": per_stage_contexts,
               "judge": getattr(probe.judge, "name", None) if probe.judge is not None else None}
    done = time.perf_counter()
    timing.update({"stages_s": retrieved - started, "judge_s": judged - retrieved, "metrics_s": scored - judged,
                   "comparisons_s": done - scored})
    return PipelineResults(
        specs=list(settings.stages), stages=stages, comparisons=comparisons, packing=packing, judging=judging,
        settings={"metrics": list(metrics), "k": probe.k, "test": settings.test, "alpha": settings.alpha,
                  "top": settings.top, "confidence_level": probe.confidence_level,
                  "n_resamples": probe.n_resamples, "seed": probe.seed, "correction": "holm-bonferroni",
                  "num_queries": len(dataset)},
        timing={key: round(value, 6) for key, value in timing.items()})


def edges(settings: PipelineSettings) -> list[tuple[str, str]]:
    """The comparisons a pipeline makes: ``(before, stage)`` for each stage over each stage it reads."""
    return [(before, spec.name) for spec in settings.stages for before in spec.inputs]


def compare_stages(settings: PipelineSettings, stages: Mapping[str, EvaluationResults], confidence_level: float,
                   n_resamples: int, seed: int) -> list[dict[str, Any]]:
    """Each edge's paired comparison on every metric: ``evret compare``'s test (:func:`compare_scores`, the same
    delta, p-value and effect size as ``evret compare A.json B.json``), Holm-corrected over every (edge, metric) of
    the pipeline, the paired bootstrap interval of the mean difference, and the queries helped and hurt most with
    the metric before and after."""
    out: list[dict[str, Any]] = []
    for before, after in edges(settings):
        a, b = stages[before], stages[after]
        metrics = [m for m in a.metrics if m in b.scores]
        scores_a, scores_b = a.per_query_scores(), b.per_query_scores()
        comparison = compare_scores({before: scores_a, after: scores_b}, metrics, test=settings.test,
                                    alpha=settings.alpha, seed=seed, top=settings.top)
        query_ids = comparison.query_ids
        diffs = {m: np.array([scores_b[q][m] - scores_a[q][m] for q in query_ids]) for m in metrics}
        intervals = bootstrap_intervals(diffs, confidence_level, n_resamples, seed)
        for pair in comparison.pairs:
            out.append({"stage": after, "over": before, "metric": pair.metric, "before": a.scores[pair.metric],
                        "after": b.scores[pair.metric], "delta": pair.delta, "interval": intervals[pair.metric],
                        "p_value": pair.p_value, "p_adjusted": pair.p_value, "significant": False,
                        "effect_size": pair.effect_size if np.isfinite(pair.effect_size) else None, "n": pair.n,
                        "helped": _moved(pair.gained, pair.metric, scores_a, scores_b),
                        "hurt": _moved(pair.lost, pair.metric, scores_a, scores_b)})
    for entry, adjusted in zip(out, holm_bonferroni([e["p_value"] for e in out]), strict=True):
        entry["p_adjusted"] = adjusted
        entry["significant"] = bool(adjusted < settings.alpha)
    return out


def _moved(rows: list[dict[str, Any]], metric: str, before: Mapping[str, Mapping[str, float]],
           after: Mapping[str, Mapping[str, float]]) -> list[dict[str, Any]]:
    """``evret compare``'s gained or lost queries with the metric before and after."""
    return [{"query_id": row["query_id"], "before": before[row["query_id"]][metric],
             "after": after[row["query_id"]][metric], "delta": row["delta"]} for row in rows]


def _packing(settings: PipelineSettings, stages: Mapping[str, EvaluationResults],
             rankings: Mapping[str, list[RankedColumns]]) -> dict[str, dict[str, Any]]:
    """Per pack stage: the budget, the documents kept of those offered (means per query), and for each recall
    metric the recall of the packed list against its input's (``survives``: packed / input, None when the input's
    is 0)."""
    out: dict[str, dict[str, Any]] = {}
    for spec in settings.stages:
        if spec.kind != "pack":
            continue
        before, after = stages[spec.inputs[0]], stages[spec.name]
        offered = rankings[spec.inputs[0]]
        kept = rankings[spec.name]
        n = max(len(kept), 1)
        recall = {}
        for metric in after.metrics:
            if metric.startswith("recall"):
                packed, given = after.scores[metric], before.scores[metric]
                recall[metric] = {"input": given, "packed": packed,
                                  "survives": packed / given if given > 0 else None}
        out[spec.name] = {"input": spec.inputs[0], "budget": spec.budget, "tokenizer": spec.tokenizer or "chars",
                          "offered": sum(len(r) for r in offered) / n, "kept": sum(len(r) for r in kept) / n,
                          "recall": recall}
    return out
