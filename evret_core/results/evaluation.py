"""Evaluation results: means with intervals, per-query detail, slices and the manifest that reproduces them.

The JSON written by :meth:`EvaluationResults.to_json` is a versioned schema (``schema_version``), documented in
``docs/results.md``. Version 2 added ``intervals``, ``confidence_level``, ``slices`` and ``manifest``; version 1
files still load (those fields are empty).
"""

from __future__ import annotations

import json
import json.encoder
import math
import platform
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_serializer

from evret_core.assign import answer_coverage, coverage_matrix
from evret_core.contracts.errors import EvretError, describe_validation_error
from evret_core.io.datasets import EvaluationDataset
from evret_core.io.redact import redact
from evret_core.progress import ProgressCallback, current_progress, report_progress
from evret_core.results.model import (
    MEAN_TOLERANCE,
    RANGE_TOLERANCE,
    Results,
    ScoreView,
    ValueCheck,
    metric_value_range,
)
from evret_core.results.per_query import Judgment, QueryColumns, QueryResult, QueryTable, query_columns
from evret_core.version import __version__

__all__ = ["EvaluationResults", "Judgment", "Manifest", "QueryResult", "SliceResult", "add_statistics", "redact_results",
           "build_manifest", "check_results", "metric_value_range"]

SCHEMA_VERSION = 2
_WRITE_PROGRESS = 2048  # records written between progress reports


class SliceResult(BaseModel):
    """Metrics over the queries sharing one tag value; ``small`` when fewer than ``min_slice_size`` queries."""

    n: int
    scores: dict[str, float]
    intervals: dict[str, list[float]] = Field(default_factory=dict)
    small: bool = False


class Manifest(BaseModel):
    """What it takes to reproduce a run: the dataset's hash, the retriever and judge settings, model and prompt
    identifiers the judge and retriever expose in ``config()``, the executor that ran it, versions, the seed and
    the time."""

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
    executor: dict[str, Any] | None = None
    plugins: dict[str, str | None] = Field(default_factory=dict)
    seed: int = 0
    statistics: dict[str, Any] = Field(default_factory=dict)
    python: str = ""
    platform: str = ""


class EvaluationResults(Results):
    """The outcome of an evaluation: ``scores`` (metric -> mean) with ``intervals`` (metric -> [low, high]),
    ``per_query`` detail, ``slices`` per tag value, and the ``manifest`` that says how it was produced.

    From the evaluator, ``per_query`` is a :class:`~evret_core.results.per_query.QueryTable`: a mapping that builds a
    query's :class:`QueryResult` when it is looked up (``results.per_query["q1"]``) and streams when iterated;
    :meth:`to_json` streams the file. Read from a file, it is a
    :class:`~evret_core.results.stored.StoredQueries`: the file's bytes and columns, a record built on lookup the
    same way. Built in Python, any mapping of query id -> :class:`QueryResult`. The base
    :class:`~evret_core.results.model.Results` checks and writes it as it does RAG results.
    """

    KIND: ClassVar[str] = "retrieval"
    LABEL: ClassVar[str] = "results"
    SCHEMA_VERSION: ClassVar[int] = SCHEMA_VERSION

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
    per_query: Mapping[str, QueryResult]
    config: dict[str, Any] = Field(default_factory=dict)
    stats: dict[str, Any] = Field(default_factory=dict)

    @field_serializer("per_query")
    def _dump_per_query(self, per_query: Mapping[str, QueryResult]) -> dict[str, QueryResult]:
        return dict(per_query.items())  # a QueryTable builds every view here: to_json streams instead

    def __getitem__(self, metric: str) -> float:
        return self.scores[metric]

    @property
    def num_queries(self) -> int:
        return len(self.per_query)

    def to_json(self, path: str | Path | None = None, indent: int | None = 2) -> str | None:
        """The results as JSON text; with ``path``, streamed there instead (atomically: all or nothing) and None
        returned, so a large run is never one string in memory."""
        if path is not None:
            self.write(path, indent)
            return None
        return self.json_text(indent)

    def iter_json(self, indent: int | None = 2) -> Iterator[str]:
        """The results JSON in chunks (one per query for ``per_query``), ending with a newline."""
        head = self.redacted_sections(json.loads(self.model_dump_json(exclude={"per_query"})))
        pad = "" if indent is None else " " * indent
        nl = "" if indent is None else "\n"
        sep = ": " if indent is not None else ":"

        def dump(value: Any, depth: int) -> str:
            separators = None if indent is not None else (",", ":")
            if indent is not None:  # json's indenting encoder is pure Python: most of a big run's writing time
                try:
                    return indented(value, "\n" + pad * depth, pad)
                except (ValueError, TypeError, RecursionError):
                    pass  # NaN, infinity or a value that is not plain JSON data: json's own encoder decides
            try:
                text = json.dumps(value, indent=indent, separators=separators, allow_nan=False)
            except ValueError:  # NaN or infinity (a retriever's score): null, as pydantic writes them
                text = json.dumps(_finite(value), indent=indent, separators=separators)
            return text.replace("\n", "\n" + pad * depth) if indent is not None else text

        keys = [k for k in type(self).model_fields if k in head or k == "per_query"]
        yield "{" + nl
        for n, key in enumerate(keys):
            comma = "," if n < len(keys) - 1 else ""
            if key != "per_query":
                yield f"{pad}{json.dumps(key)}{sep}{dump(head[key], 1)}{comma}{nl}"
                continue
            items = _query_records(self.per_query)
            first = next(items, None)
            if first is None:
                yield f"{pad}\"per_query\"{sep}{{}}{comma}{nl}"
                continue
            yield f"{pad}\"per_query\"{sep}{{{nl}"
            progress, total = current_progress(), len(self.per_query)
            report_progress(progress, "write", 0, total)
            qid, record = first
            for done, nxt in enumerate(items, start=1):
                yield f"{pad * 2}{json.dumps(qid)}{sep}{dump(record, 2)},{nl}"
                qid, record = nxt
                if progress is not None and done % _WRITE_PROGRESS == 0:
                    progress("write", done, total)
            yield f"{pad * 2}{json.dumps(qid)}{sep}{dump(record, 2)}{nl}{pad}}}{comma}{nl}"
            report_progress(progress, "write", total, total)
        yield "}\n"

    @classmethod
    def from_json(cls, path_or_text: str | Path) -> EvaluationResults:
        """Read results written by ``to_json`` (a path, or the JSON text itself), ``per_query`` as columns
        (:mod:`evret_core.results.stored`); see :meth:`Results.from_json`."""
        from evret_core.results.stored import read_results

        read = read_results(path_or_text)
        if read is None:  # read whole, as every other document
            return super().from_json(path_or_text)
        head, stored, source = read
        return cls.from_document(head, source) if stored is None else cls.from_stored(head, stored, source)

    @classmethod
    def from_stored(cls, head: dict[str, Any], per_query: Mapping[str, QueryResult], source: str) -> EvaluationResults:
        """Results from a document's top-level fields (``head``) and its ``per_query`` read as columns
        (:class:`~evret_core.results.stored.StoredQueries`): checked as :meth:`from_document` checks a whole
        document, with the same errors."""
        cls.check_document({**head, "per_query": per_query}, source)
        version = head.get("schema_version", 1)
        if not isinstance(version, int) or version > cls.SCHEMA_VERSION:
            raise EvretError(f"{source}: {cls.LABEL} schema_version {version!r} is newer than this Evret reads "
                             f"({cls.SCHEMA_VERSION}); upgrade evret-core")
        try:
            results = cls.model_validate({**head, "per_query": {}})  # the records were validated as they were read
        except ValidationError as exc:
            raise EvretError(cls.validation_message(source, describe_validation_error(exc))) from None
        results.per_query = per_query
        results.check_values(source)
        return results

    @classmethod
    def check_document(cls, data: Any, source: str) -> None:
        if not isinstance(data, dict) or "per_query" not in data or "scores" not in data:
            raise EvretError(f"{source}: not an Evret results file (no 'scores' and 'per_query')")

    def check_values(self, source: str) -> None:
        check_results(self, source)

    def score_view(self) -> ScoreView:
        """Means, intervals and per-query scores by metric name."""
        return ScoreView(dict(self.scores), dict(self.intervals), self.per_query_scores())

    def redacted(self) -> EvaluationResults:
        return redact_results(self.model_copy())

    def manifest_dict(self) -> dict[str, Any]:
        """The manifest, redacted (empty for a version 1 file, which has none)."""
        return redact(self.manifest.model_dump()) if self.manifest is not None else {}

    def to_pandas(self, level: str = "query") -> Any:
        """A pandas DataFrame with one row per query (``level="query"``: metrics, tags) or per judged document
        (``level="judgment"``); pandas is the optional extra ``evret-core[pandas]`` (see :mod:`evret_core.results.frames`)."""
        from evret_core.results.frames import to_pandas

        return to_pandas(self, level)

    def per_query_scores(self) -> dict[str, dict[str, float]]:
        """query id -> metric -> value."""
        if isinstance(self.per_query, QueryTable):
            columns = {m: v.tolist() for m, v in self.per_query.score_columns().items()}
            return {qid: {m: values[i] for m, values in columns.items()} for i, qid in enumerate(self.per_query)}
        if hasattr(self.per_query, "query_columns"):  # a file read back: from its columns
            return query_columns(self.per_query).per_query()
        return {qid: dict(qr.scores) for qid, qr in self.per_query.items()}

    def query_columns(self) -> QueryColumns:
        """The per-query scores and tags as columns, in query order, without building views."""
        return query_columns(self.per_query)

    def score_columns(self) -> tuple[list[str], dict[str, np.ndarray], list[dict[str, str]]]:
        """(query ids, metric -> per-query values, per-query tags), in query order, without building views (a
        query lacking a metric counts 0 there)."""
        if isinstance(self.per_query, QueryTable):
            table = self.per_query
            columns = table.score_columns()
            return list(table), {m: columns.get(m, np.zeros(len(table))) for m in self.metrics}, table.tags()
        found = query_columns(self.per_query)
        return found.ids, {m: found.filled(m) for m in self.metrics}, list(found.tags)  # type: ignore[arg-type]

    def metric_curves(self, max_k: int | None = None) -> dict[str, list[float]]:
        """Mean ``family@k`` for k = 1..K for each metric family of this run, from the stored judgments alone.

        K is ``max_k`` or the longest ranking. Families whose metric cannot be created here (a plugin metric
        that is not installed) are left out.
        """
        from evret_core.plugins.registry import create_metric, parse_metric_name

        ranked = self._ranked_batch(max_k)
        if ranked is None:
            return {}
        batch, depth = ranked
        level = self.config.get("relevance_level")  # the level the run's binary measures used (evret evaluate -l)
        if isinstance(level, (int, float)) and not isinstance(level, bool) and math.isfinite(level):
            batch.relevance_level = float(level)
        options: dict[str, dict[str, Any]] = {}
        for entry in self.config.get("metrics", []):
            if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                options[parse_metric_name(entry["name"])[0]] = {k: v for k, v in entry.items() if k != "name"}
        curves: dict[str, list[float]] = {}
        for name in self.metrics:
            family = parse_metric_name(name)[0]
            if family in curves:
                continue
            values: list[float] = []
            try:
                for k in range(1, depth + 1):
                    metric = create_metric(f"{family}@{k}", **options.get(family, {}))
                    values.append(float(np.asarray(metric.compute(batch), dtype=np.float64).mean()))
            except EvretError:
                continue
            curves[family] = values
        return curves

    def _ranked_batch(self, max_k: int | None) -> tuple[Any, int] | None:
        """The run's rankings as a ``RankedBatch`` (with the answers' coverage under ``any_match``) and the depth of
        the curves, or None when there is nothing to draw. A file read back and the evaluator's table give them from
        their rank columns (:class:`~evret_core.results.per_query.RankColumns`), without building any record."""
        from evret_core.contracts.metric import RankedBatch

        any_match = self.config.get("matching") == "any_match"  # recall counts expected answers: the same coverage
        ranks = getattr(self.per_query, "ranks", None)
        if ranks is not None:
            n = len(ranks.num_ret)
            depth = int(ranks.num_ret.max()) if n else 0
            depth = min(depth, max_k) if max_k else depth
            if not n or depth == 0:
                return None
            rows = np.repeat(np.arange(n), ranks.qrel_lengths)
            batch = RankedBatch.from_positions(rows, ranks.ranks, ranks.grades, ranks.qrel_lengths, ranks.num_ret,
                                               int(ranks.num_ret.max()))
            if any_match:
                found: list[list[int] | None] = [ranks.coverage.get(row) for row in range(n)]
                batch.set_answer_coverage(coverage_matrix(found, batch.depth), ranks.answers.copy())
            return batch, depth
        queries = list(self.per_query.values())
        depth = max((len(q.judgments) for q in queries), default=0)
        depth = min(depth, max_k) if max_k else depth
        if not queries or depth == 0:
            return None
        batch = RankedBatch.from_rankings([q.ranking for q in queries], [q.relevant_ids for q in queries])
        if any_match:
            by_text = [q.labelled_by == "text" and bool(q.expected_answers) for q in queries]
            found = [answer_coverage([j.matched for j in q.judgments]) if t else None
                     for q, t in zip(queries, by_text, strict=True)]
            counts = [len(q.expected_answers) if t else 0 for q, t in zip(queries, by_text, strict=True)]
            batch.set_answer_coverage(coverage_matrix(found, batch.depth), np.asarray(counts))
        return batch, depth


def redact_results(results: EvaluationResults) -> EvaluationResults:
    """``results`` with its ``config``, ``manifest`` and ``stats`` redacted (in place; returned for chaining), as
    for a results file written before redaction existed, before it goes into a report."""
    results.config = redact(results.config)
    results.stats = redact(results.stats)
    if results.manifest is not None:
        data = redact(results.manifest.model_dump())
        results.manifest = type(results.manifest).model_validate(data)
    return results


def check_results(results: EvaluationResults, source: str) -> None:
    """Refuse results whose numbers cannot be what Evret wrote: a per-query score that is NaN, infinite or outside
    its metric's range, a ``per_query`` key holding another query's record, a mean that is not the mean of its
    per-query values (or of none: no query holds the metric), an interval that is not ``[low, high]`` with finite
    ``low <= high``, a confidence level outside (0, 1), a slice whose count or means are not those of the queries
    carrying its tag value, a prediction-powered estimate that is not what its own parts give, a manifest field of
    the wrong type. Errors name ``source``, where the number is and the query or metric, so a hand-edited or damaged
    file never reaches a report, a gate or a tracking server. The checks read the per-query columns
    (:func:`~evret_core.results.per_query.query_columns`): no query's record is built unless one is wrong."""
    check = ValueCheck(source)
    columns = query_columns(results.per_query)
    _check_queries(results.per_query, columns, check)
    held = {metric: columns.held(metric) for metric in columns.values}
    for metric, stored in results.scores.items():
        check.value(stored, metric, "scores")
        check.mean(stored, held.get(metric, []), metric, f"scores.{metric}", total=len(columns.ids))
    for metric, interval in results.intervals.items():
        check.interval(interval, metric, f"intervals.{metric}")
    if results.confidence_level is not None:
        check.level(results.confidence_level, "confidence_level")
    check_slices(results, check, columns)
    check_prediction_powered(results, check, held)
    check_manifest(results.manifest, check)


def _check_queries(per_query: Mapping[str, QueryResult], columns: QueryColumns, check: ValueCheck) -> None:
    """The first query (in file order) whose key names another query's record or whose score is not a finite
    number in its metric's range, reported as the record-by-record check reports it (that one record is built)."""
    first = min(columns.mismatched, default=None)
    for metric, values in columns.values.items():
        bad = check.first_bad(values, metric, columns.present[metric])
        if bad is not None and (first is None or bad < first):
            first = bad
    if first is None:
        return
    qid = columns.ids[first]
    qr = per_query[qid]
    if qr.query_id != qid:
        raise EvretError(f"{check.source}: per_query key {qid!r} holds the record of query {qr.query_id!r}; the "
                         f"file was edited or damaged")
    for metric, value in qr.scores.items():
        check.value(value, metric, f"query {qid!r}")


def check_slices(results: EvaluationResults, check: ValueCheck, columns: QueryColumns | None = None) -> None:
    """Each slice's ``n`` is the number of queries carrying its tag value, and each of its means is the mean of
    those queries' values (a query lacking the metric left out or counted as 0, as for ``scores``). ``columns``:
    the run's per-query columns, when the caller has them."""
    if not results.slices:
        return
    columns = query_columns(results.per_query) if columns is None else columns
    members: dict[str, dict[str, list[int]]] = {tag: {} for tag in results.slices}
    for row, tags in enumerate(columns.tags):
        for tag, value in tags.items():
            if tag in members:
                members[tag].setdefault(str(value), []).append(row)
    for tag, groups in results.slices.items():
        for group, sliced in groups.items():
            where = f"slices.{tag}.{group}"
            rows = members[tag].get(group)
            if rows is None:
                raise check.fail(f"{where}: no query has {tag}={group!r}")
            if sliced.n != len(rows):
                raise check.fail(f"{where}.n is {sliced.n} but {len(rows)} queries have {tag}={group!r}")
            index = np.asarray(rows, dtype=np.int64)
            for metric, mean in sliced.scores.items():
                check.value(mean, metric, f"{where}.scores")
                values = (columns.values[metric][index][columns.present[metric][index]].tolist()
                          if metric in columns.values else [])
                check.mean(mean, values, metric, f"{where}.scores.{metric}", total=len(rows))
            for metric, interval in sliced.intervals.items():
                check.interval(interval, metric, f"{where}.intervals.{metric}")


def check_prediction_powered(results: EvaluationResults, check: ValueCheck,
                             columns: Mapping[str, Sequence[float]]) -> None:
    """Each prediction-powered entry (:mod:`evret_core.calibration.ppi`) is what its parts give: ``judged`` the mean
    of the run's per-query values, ``estimate`` = judged + rectifier (clipped to ``value_range`` when the entry has
    one), an interval around it inside the metric's range, counts no larger than the run, a level in (0, 1).
    ``columns`` holds the per-query values of each metric (those the file holds)."""
    queries = len(results.per_query)
    for metric, entry in results.prediction_powered.items():
        where = f"prediction_powered.{metric}"
        if metric not in results.scores:
            raise check.fail(f"{where}: the run has no metric {metric}")
        entry = check.table(entry, where)
        for key in ("estimate", "interval", "n_labelled", "judged", "rectifier"):
            if key not in entry:
                raise check.fail(f"{where} has no {key}")
        limits = check.bounds(metric)
        width = None if limits is None else limits[1] - limits[0]
        # entries written before clipping (no value_range) hold the normal-theory values: judged (in range) plus a
        # rectifier (within the range's width either way), with an interval around it that may leave the range
        clipped = entry.get("value_range") is not None
        reach = limits if clipped or limits is None or width is None else (limits[0] - width, limits[1] + width)
        estimate = check.number(entry["estimate"], f"{where}.estimate", reach)
        low, high = check.pair(entry["interval"], f"{where}.interval", limits if clipped else None)
        labelled = check.count(entry["n_labelled"], f"{where}.n_labelled", queries)
        if not low - RANGE_TOLERANCE <= estimate <= high + RANGE_TOLERANCE:
            raise check.fail(f"{where}.estimate is {estimate!r}, outside its interval [{low!r}, {high!r}]")
        if "confidence_level" in entry:
            check.level(entry["confidence_level"], f"{where}.confidence_level")
        if "n" in entry:
            n = check.count(entry["n"], f"{where}.n", queries)
            holding = len(columns.get(metric, ()))
            if n != holding:
                raise check.fail(f"{where}.n is {n} but {holding} queries hold {metric}")
            if labelled > n:
                raise check.fail(f"{where}.n_labelled is {labelled} but n is {n}")
        judged = check.number(entry["judged"], f"{where}.judged", limits)
        check.mean(judged, columns.get(metric, []), metric, f"{where}.judged")
        rectifier = check.number(entry["rectifier"], f"{where}.rectifier", None if width is None else (-width, width))
        _check_ppi_arithmetic(entry, where, judged + rectifier, estimate, (low, high), check)


def _check_ppi_arithmetic(entry: dict[str, Any], where: str, raw: float, estimate: float,
                          interval: tuple[float, float], check: ValueCheck) -> None:
    """The estimate and interval of a prediction-powered entry against judged + rectifier: equal to it with a
    normal interval centred on it, or (entries with ``value_range``) clipped to the range from the unclipped ones."""
    if "value_range" not in entry or entry["value_range"] is None:
        check.agree(estimate, raw, f"{where}.estimate", "judged + rectifier")
        check.agree((interval[0] + interval[1]) / 2, estimate, f"{where}.interval's centre", "the estimate")
        return
    bottom, top = check.pair(entry["value_range"], f"{where}.value_range")
    unclipped = check.number(entry.get("unclipped_estimate"), f"{where}.unclipped_estimate")
    check.agree(unclipped, raw, f"{where}.unclipped_estimate", "judged + rectifier")
    clipped = min(max(unclipped, bottom), top)
    if abs(estimate - clipped) > MEAN_TOLERANCE * max(1.0, abs(clipped)):
        raise check.fail(f"{where}.estimate is {estimate!r} but judged + rectifier is {raw!r} ({clipped!r} in "
                         f"[{bottom:g}, {top:g}])")
    low, high = check.pair(entry.get("unclipped_interval"), f"{where}.unclipped_interval")
    check.agree((low + high) / 2, unclipped, f"{where}.unclipped_interval's centre", "the unclipped estimate")
    for end, stored, normal in (("low", interval[0], low), ("high", interval[1], high)):
        check.agree(stored, min(max(normal, bottom), top), f"{where}.interval's {end} end",
                    f"the unclipped interval's, clipped to [{bottom:g}, {top:g}],")


def check_manifest(manifest: Manifest | None, check: ValueCheck) -> None:
    """The manifest's dataset fields have the types Evret writes: ``name`` and ``hash`` strings, ``num_queries`` a
    count (reports print them; a number where the hash belongs is an error, not a traceback)."""
    if manifest is None:
        return
    for key in ("name", "hash"):
        value = manifest.dataset.get(key)
        if value is not None and not isinstance(value, str):
            raise check.fail(f"manifest.dataset.{key} is {value!r} ({type(value).__name__}); a dataset {key} is a "
                             f"string")
    if manifest.dataset.get("num_queries") is not None:
        check.count(manifest.dataset["num_queries"], "manifest.dataset.num_queries")


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
        from evret_core.plugins.loading import list_plugins

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
        executor=config.get("executor"),
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
    progress: ProgressCallback | None = None,
) -> EvaluationResults:
    """Fill ``intervals``, ``slices`` and ``manifest`` of ``results`` from its per-query scores (in place);
    ``progress`` sees the stage ``statistics`` (2 steps: the manifest with the dataset's hash, the bootstrap)."""
    from evret_core.statistics.inference import bootstrap_intervals, slice_scores

    _, columns, tags = results.score_columns()
    results.config = redact(results.config)
    results.confidence_level = confidence_level
    settings = {"confidence_level": confidence_level, "n_resamples": n_resamples, "interval": "percentile bootstrap",
                "min_slice_size": min_slice_size}

    def resample() -> tuple[dict[str, list[float]], dict[str, Any]]:
        return (bootstrap_intervals(columns, confidence_level, n_resamples, seed),
                slice_scores(columns, tags, confidence_level, n_resamples, seed, min_slice_size))

    report_progress(progress, "statistics", 0, 2)
    if dataset is None:
        intervals, sliced = resample()
        report_progress(progress, "statistics", 1, 2)
        manifest = build_manifest(results, None, seed, settings)
    else:
        # the bootstrap is numpy and C work that runs without the GIL; the dataset's hash is Python work: on two
        # cores they run side by side (the hash lets the bootstrap's threads in at each of its digest updates)
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="evret-statistics") as pool:
            pending = pool.submit(resample)
            manifest = build_manifest(results, dataset, seed, settings)
            report_progress(progress, "statistics", 1, 2)
            intervals, sliced = pending.result()
    report_progress(progress, "statistics", 2, 2)
    results.intervals = intervals
    results.slices = {tag: {value: SliceResult(**data) for value, data in values.items()}
                      for tag, values in sliced.items()}
    results.manifest = manifest
    return results


_ENCODE_STR = json.encoder.encode_basestring_ascii  # json's own (C) string encoder, as json.dumps uses
_INFINITY = float("inf")


def indented(value: Any, newline: str, step: str) -> str:
    """``value`` as ``json.dumps(value, indent=len(step))`` writes it, every line after the first starting with
    ``newline``'s indentation, in a fraction of its time: plain JSON data only (str, int, float, bool, None,
    lists, tuples and dicts with str keys, of exactly those types); anything else raises TypeError and a NaN or an
    infinity ValueError, for json itself to encode."""
    kind = type(value)
    if kind is not list and kind is not tuple and kind is not dict:
        return _item(value, newline, step)
    if not value:
        return "{}" if kind is dict else "[]"
    inner = newline + step
    parts = []
    # the common scalars inline: a call per value would cost more than the encoding
    for key, item in value.items() if kind is dict else enumerate(value):
        of = type(item)
        if of is str:
            text = _ENCODE_STR(item)
        elif of is float and item == item and item != _INFINITY and item != -_INFINITY:
            text = float.__repr__(item)
        elif of is int:
            text = int.__repr__(item)
        elif item is None:
            text = "null"
        elif of is dict and len(item) == 7 and tuple(item) == _JUDGMENT_KEYS:
            text = _judgment(item, inner, step)
        else:
            text = _item(item, inner, step)
        if kind is dict:
            if type(key) is not str:
                raise TypeError("a key that is not a str")
            text = _ENCODE_STR(key) + ": " + text
        parts.append(text)
    if kind is dict:
        return "{" + inner + ("," + inner).join(parts) + newline + "}"
    return "[" + inner + ("," + inner).join(parts) + newline + "]"


_JUDGMENT_KEYS = ("rank", "doc_id", "score", "text", "matched", "unmeasured", "assigned")


def _judgment(value: dict[str, Any], newline: str, step: str) -> str:
    """A judgment record as :func:`indented` writes it: in one piece when it holds what the evaluator writes (an
    int rank, str ids, a finite score or null, a text or null, no answers matched), most of a big run's records."""
    rank, doc, score, text, matched, unmeasured, assigned = value.values()
    if (type(rank) is int and type(doc) is str and (score is None or type(score) is float and score == score
            and score != _INFINITY and score != -_INFINITY) and (text is None or type(text) is str)
            and type(matched) is list and not matched and type(unmeasured) is list and not unmeasured
            and (assigned is None or type(assigned) is str)):
        at = newline + step
        return (f'{{{at}"rank": {int.__repr__(rank)},{at}"doc_id": {_ENCODE_STR(doc)},{at}"score": '
                f'{"null" if score is None else float.__repr__(score)},{at}"text": '
                f'{"null" if text is None else _ENCODE_STR(text)},{at}"matched": [],{at}"unmeasured": [],{at}'
                f'"assigned": {"null" if assigned is None else _ENCODE_STR(assigned)}{newline}}}')
    return indented(value, newline, step)


def _item(value: Any, newline: str, step: str) -> str:
    """One value of :func:`indented`: scalars here, containers there (one call per container, not per value)."""
    kind = type(value)
    if kind is str:
        return _ENCODE_STR(value)
    if kind is float:
        if value != value or value == _INFINITY or value == -_INFINITY:
            raise ValueError("not a finite number")
        return float.__repr__(value)
    if kind is int:
        return int.__repr__(value)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    if kind is list or kind is tuple or kind is dict:
        return indented(value, newline, step) if value else ("[]" if kind is not dict else "{}")
    raise TypeError(f"not plain JSON data: {kind.__name__}")


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if np.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def _query_records(per_query: Mapping[str, QueryResult]) -> Iterator[tuple[str, Any]]:
    if isinstance(per_query, QueryTable):
        yield from per_query.records()
        return
    for qid, qr in per_query.items():
        yield qid, json.loads(qr.model_dump_json())
