"""Evaluation results: means with intervals, per-query detail, slices and the manifest that reproduces them.

The JSON written by :meth:`EvaluationResults.to_json` is a versioned schema (``schema_version``), documented in
``docs/results.md``. Version 2 added ``intervals``, ``confidence_level``, ``slices`` and ``manifest``; version 1
files still load (those fields are empty).
"""

from __future__ import annotations

import platform
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evret_core.corpus import loads_json, read_text
from evret_core.errors import EvretError, describe_validation_error
from evret_core.outputs import write_output
from evret_core.redact import redact

if TYPE_CHECKING:
    from evret_core.models import EvaluationDataset

SCHEMA_VERSION = 2


class Judgment(BaseModel):
    """What the judge said about one retrieved document of a query.

    ``matched`` lists the indexes of the expected answers it matched; ``unmeasured`` those whose judgment could not
    be made (e.g. an LLM call that failed after every retry). ``assigned`` is the id the document scored as.
    """

    rank: int
    doc_id: str
    score: float | None = None
    text: str | None = None
    matched: list[int] = Field(default_factory=list)
    unmeasured: list[int] = Field(default_factory=list)
    assigned: str | None = None


class QueryResult(BaseModel):
    """One query's scores and the evidence behind them."""

    query_id: str
    query_text: str
    scores: dict[str, float]
    retrieved_ids: list[str]
    relevant_ids: dict[str, float] = Field(default_factory=dict)
    judgments: list[Judgment] = Field(default_factory=list)
    expected_answers: list[str] = Field(default_factory=list)
    tags: dict[str, str] = Field(default_factory=dict)
    labelled_by: str = "text"
    unmeasured: int = 0

    @property
    def ranking(self) -> list[str]:
        """The ids the retrieved documents scored as, by rank (judged ids for text-labelled queries)."""
        return [j.assigned if j.assigned is not None else j.doc_id for j in self.judgments]

    @property
    def gains(self) -> list[float]:
        """The relevance grade scored at each rank (0 when not relevant; a repeated id counts once)."""
        seen: set[str] = set()
        out: list[float] = []
        for doc in self.ranking:
            out.append(0.0 if doc in seen else float(self.relevant_ids.get(doc, 0.0)))
            seen.add(doc)
        return out


class SliceResult(BaseModel):
    """Metrics over the queries sharing one tag value; ``small`` when fewer than ``min_slice_size`` queries."""

    n: int
    scores: dict[str, float]
    intervals: dict[str, list[float]] = Field(default_factory=dict)
    small: bool = False


class Manifest(BaseModel):
    """What it takes to reproduce a run: the dataset's hash, the retriever and judge settings, model and prompt
    identifiers the judge and retriever expose in ``config()``, versions, the seed and the time."""

    model_config = ConfigDict(extra="allow")

    evret_version: str
    created_at: str
    dataset: dict[str, Any] = Field(default_factory=dict)
    retriever: dict[str, Any] | None = None
    judge: dict[str, Any] | str | None = None
    models: dict[str, Any] = Field(default_factory=dict)
    metrics: list[dict[str, Any]] = Field(default_factory=list)
    matching: str | None = None
    k: int | None = None
    plugins: dict[str, str | None] = Field(default_factory=dict)
    seed: int = 0
    statistics: dict[str, Any] = Field(default_factory=dict)
    python: str = ""
    platform: str = ""


class EvaluationResults(BaseModel):
    """The outcome of an evaluation: ``scores`` (metric -> mean) with ``intervals`` (metric -> [low, high]),
    ``per_query`` detail, ``slices`` per tag value, and the ``manifest`` that says how it was produced."""

    schema_version: int = SCHEMA_VERSION
    scores: dict[str, float]
    metrics: list[str]
    intervals: dict[str, list[float]] = Field(default_factory=dict)
    confidence_level: float | None = None
    slices: dict[str, dict[str, SliceResult]] = Field(default_factory=dict)
    manifest: Manifest | None = None
    # metric -> prediction-powered estimate with an interval covering judge error (evret_core.calibration.ppi)
    prediction_powered: dict[str, dict[str, Any]] = Field(default_factory=dict)
    # the bulk comes last so the summary fields head the JSON file
    per_query: dict[str, QueryResult]
    config: dict[str, Any] = Field(default_factory=dict)
    stats: dict[str, Any] = Field(default_factory=dict)

    def __getitem__(self, metric: str) -> float:
        return self.scores[metric]

    @property
    def num_queries(self) -> int:
        return len(self.per_query)

    def to_json(self, path: str | Path | None = None, indent: int | None = 2) -> str:
        """The results as JSON; with ``path``, also written there atomically (all or nothing)."""
        text = self.model_dump_json(indent=indent)
        if path is not None:
            atomic_write_text(Path(path), text + "\n")
        return text

    @classmethod
    def from_json(cls, path_or_text: str | Path) -> EvaluationResults:
        """Read results written by :meth:`to_json` (a path, or the JSON text itself)."""
        if isinstance(path_or_text, Path) or not str(path_or_text).lstrip().startswith("{"):
            path = Path(path_or_text)
            text, source = read_text(path, "results file"), str(path)
        else:
            text, source = str(path_or_text), "<json>"
        data = loads_json(text, source)
        if not isinstance(data, dict) or "per_query" not in data or "scores" not in data:
            raise EvretError(f"{source}: not an Evret results file (no 'scores' and 'per_query')")
        version = data.get("schema_version", 1)
        if not isinstance(version, int) or version > SCHEMA_VERSION:
            raise EvretError(f"{source}: results schema_version {version!r} is newer than this Evret reads "
                             f"({SCHEMA_VERSION}); upgrade evret-core")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:  # one line naming the file and the field
            raise EvretError(f"{source}: not an Evret results file ({describe_validation_error(exc)})") from None

    def per_query_scores(self) -> dict[str, dict[str, float]]:
        """query id -> metric -> value."""
        return {qid: dict(qr.scores) for qid, qr in self.per_query.items()}

    def metric_curves(self, max_k: int | None = None) -> dict[str, list[float]]:
        """Mean ``family@k`` for k = 1..K for each metric family of this run, from the stored judgments alone.

        K is ``max_k`` or the longest ranking. Families whose metric cannot be created here (a plugin metric
        that is not installed) are left out.
        """
        from evret_core.metrics.base import RankedBatch
        from evret_core.registry import create_metric, parse_metric_name

        queries = list(self.per_query.values())
        depth = max((len(q.judgments) for q in queries), default=0)
        depth = min(depth, max_k) if max_k else depth
        if not queries or depth == 0:
            return {}
        batch = RankedBatch.from_rankings([q.ranking for q in queries], [q.relevant_ids for q in queries])
        options: dict[str, dict[str, Any]] = {}
        for entry in self.config.get("metrics", []):
            if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                options[parse_metric_name(entry["name"])[0]] = {k: v for k, v in entry.items() if k != "name"}
        any_match = self.config.get("matching") == "any_match"
        curves: dict[str, list[float]] = {}
        for name in self.metrics:
            family = parse_metric_name(name)[0]
            if family in curves:
                continue
            values: list[float] = []
            try:
                for k in range(1, depth + 1):
                    metric = create_metric(f"{family}@{k}", **options.get(family, {}))
                    per_query = np.asarray(metric.compute(batch), dtype=np.float64)
                    if any_match and family == "recall":
                        per_query = _any_match_recall(queries, per_query, k)
                    values.append(float(per_query.mean()))
            except EvretError:
                continue
            curves[family] = values
        return curves


def _any_match_recall(queries: list[QueryResult], values: np.ndarray, k: int) -> np.ndarray:
    # in any_match mode recall counts the expected answers found in the top k, as the evaluator does
    out = values.copy()
    for i, q in enumerate(queries):
        if q.labelled_by != "text" or not q.expected_answers:
            continue
        found = {j for jd in q.judgments[:k] for j in jd.matched}
        out[i] = len(found) / len(q.expected_answers)
    return out


def _model_identifiers(config: Any, prefix: str) -> dict[str, Any]:
    """Entries of a (nested) config naming a model, a prompt, a revision or a hash: ``{"judge.model": ...}``."""
    found: dict[str, Any] = {}
    if not isinstance(config, dict):
        return found
    for key, value in config.items():
        path = f"{prefix}.{key}"
        if isinstance(value, dict):
            found.update(_model_identifiers(value, path))
        elif any(word in str(key).lower() for word in ("model", "prompt", "hash", "revision")):
            found[path] = value
    return found


def _plugin_versions() -> dict[str, str | None]:
    try:
        from evret_core.plugins import list_plugins

        return {p.name: p.version for p in list_plugins() if not p.builtin}
    except Exception:  # the manifest must never fail a finished run
        return {}


def build_manifest(
    results: EvaluationResults,
    dataset: EvaluationDataset | None = None,
    seed: int = 0,
    statistics: dict[str, Any] | None = None,
) -> Manifest:
    """The reproducibility manifest of ``results``, from its ``config`` and the dataset it was scored on."""
    from evret_core import __version__

    config = redact(results.config)  # keys and URL credentials never reach a results file
    dataset_info: dict[str, Any] = {"num_queries": results.num_queries}
    if dataset is not None:
        dataset_info.update(name=dataset.name, hash=dataset.content_hash(), num_queries=len(dataset))
    models = {**_model_identifiers(config.get("retriever"), "retriever"),
              **_model_identifiers(config.get("judge"), "judge")}
    return Manifest(
        evret_version=__version__,
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        dataset=dataset_info,
        retriever=config.get("retriever"),
        judge=config.get("judge"),
        models=models,
        metrics=list(config.get("metrics", [])),
        matching=config.get("matching"),
        k=config.get("k"),
        plugins=_plugin_versions(),
        seed=seed,
        statistics=statistics or {},
        python=platform.python_version(),
        platform=platform.platform(terse=True),
    )


def add_statistics(
    results: EvaluationResults,
    dataset: EvaluationDataset | None = None,
    confidence_level: float = 0.95,
    n_resamples: int = 1000,
    seed: int = 0,
    min_slice_size: int = 10,
) -> EvaluationResults:
    """Fill ``intervals``, ``slices`` and ``manifest`` of ``results`` from its per-query scores (in place)."""
    from evret_core.stats import bootstrap_intervals, slice_scores

    queries = list(results.per_query.values())
    columns = {m: [q.scores.get(m, 0.0) for q in queries] for m in results.metrics}
    results.config = redact(results.config)
    results.confidence_level = confidence_level
    results.intervals = bootstrap_intervals(columns, confidence_level, n_resamples, seed)
    sliced = slice_scores(columns, [q.tags for q in queries], confidence_level, n_resamples, seed, min_slice_size)
    results.slices = {tag: {value: SliceResult(**data) for value, data in values.items()}
                      for tag, values in sliced.items()}
    results.manifest = build_manifest(
        results, dataset, seed,
        {"confidence_level": confidence_level, "n_resamples": n_resamples, "interval": "percentile bootstrap",
         "min_slice_size": min_slice_size},
    )
    return results


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` safely (atomically for regular files; see :mod:`evret_core.outputs`)."""
    write_output(path, text)
