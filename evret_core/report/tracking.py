"""Experiment tracking: a finished run logged to MLflow (``--mlflow``, :func:`log_to_mlflow`).

One mapping for every kind of results (:func:`tracked_run`): retrieval results, RAG results and, from
``evret trec``, a run file's scores. A run logs

- **parameters**: the results' ``config`` flattened to ``retriever.name``, ``judge.min_tokens``... (lists as JSON,
  secrets masked by :mod:`evret_core.io.redact`), and the bootstrap settings;
- **metrics**: every score under :func:`mlflow_name` of its Evret name (``ndcg@10`` -> ``ndcg_at_10``,
  ``retrieved/f1`` as it is), with its interval as ``NAME.ci_low`` and ``NAME.ci_high``; RAG runs log their scores
  by the gates' names (``retrieval/recall@5``, ``gold/f1``...) and the failure attribution counts;
- **tags**: ``evret.kind`` and every short (at most 250 characters) scalar entry of the manifest
  (``evret.evret_version``, ``evret.dataset.hash``, ``evret.judge.name``...);
- **artifacts**: ``results.json`` (what ``--output`` writes), ``manifest.json``, ``report.html`` (the report
  ``evret report --format html`` makes) and ``metric_names.json`` (MLflow name -> Evret name).

MLflow (``pip install mlflow-skinny``, the extra ``mlflow``) is imported only inside these functions. MLflow metric names cannot
hold ``@``: :func:`mlflow_name` maps every name to one MLflow accepts, and :func:`evret_name` maps it back.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from urllib.request import url2pathname

from evret_core.contracts.errors import EvretError

__all__ = ["INSTALL", "TrackedRun", "check_tracking", "evret_name", "log_to_mlflow", "mlflow_name",
           "split_metric_name", "tracked_run"]

INSTALL = "pip install mlflow-skinny"
"""What makes ``--mlflow`` work: the optional extra (mlflow-skinny)."""

INTERVAL_SUFFIXES = (".ci_low", ".ci_high")
MAX_NAME = 250  # MLflow's longest metric, parameter or tag name
MAX_PARAM_VALUE = 6000  # MLflow's longest parameter value
SHORT_TAG = 250  # a manifest entry longer than this stays in manifest.json only
BATCH = 100  # MLflow's most parameters or tags per call
CHECK_TIMEOUT_S = 5
"""The bound of the check of a tracking server before the work: one try, at most this many seconds."""
LOG_TIMEOUT_S = 10
LOG_RETRIES = 1
"""The bounds of each MLflow call that logs a run (unless ``MLFLOW_HTTP_REQUEST_TIMEOUT`` /
``MLFLOW_HTTP_REQUEST_MAX_RETRIES`` say otherwise): MLflow's own default, 7 retries with backoff and a 120 s
timeout, takes over 4 minutes to give up on a server that fails."""
HTTP_BOUNDS = ("MLFLOW_HTTP_REQUEST_TIMEOUT", "MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR",
               "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER")
_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


def mlflow_name(name: str) -> str:
    """``name`` (``ndcg@10``, ``retrieved/f1``, ``ndcg@10(gain=exponential)``) as an MLflow metric name.

    ``@`` becomes ``_at_``; letters, digits, ``_``, ``-`` and a ``/`` between two other characters stay; every
    other character ``c`` becomes ``.HEX.`` (its code point in lower-case hexadecimal: ``(`` -> ``.28.``), and so
    does a ``_`` that would otherwise start a ``_at_`` the original did not have. Names are never ambiguous:
    :func:`evret_name` inverts this exactly, and a name never ends in ``.ci_low`` or ``.ci_high``."""
    out: list[str] = []
    for i, c in enumerate(name):
        if c == "@":
            out.append("_at_")
        elif c == "_" and name[i + 1:i + 3] == "at" and name[i + 3:i + 4] in ("_", "@"):
            out.append(".5f.")
        elif c in _PLAIN or (c == "/" and 0 < i < len(name) - 1 and "/" not in (name[i - 1], name[i + 1])):
            out.append(c)
        else:
            out.append(f".{ord(c):x}.")
    return "".join(out)


def evret_name(name: str) -> str:
    """The Evret name that :func:`mlflow_name` mapped to ``name`` (``ndcg_at_10`` -> ``ndcg@10``)."""
    out: list[str] = []
    i = 0
    while i < len(name):
        if name.startswith("_at_", i):
            out.append("@")
            i += 4
        elif name[i] == ".":
            end = name.find(".", i + 1)
            code = name[i + 1:end] if end > 0 else ""
            if not code or any(c not in "0123456789abcdef" for c in code):
                raise EvretError(f"{name!r} is not a metric name written by Evret (a '.' starts no .HEX. escape)")
            out.append(chr(int(code, 16)))
            i = end + 1
        else:
            out.append(name[i])
            i += 1
    return "".join(out)


def split_metric_name(name: str) -> tuple[str, str]:
    """An MLflow metric name logged by Evret as (Evret name, part): part is ``mean``, ``ci_low`` or ``ci_high``."""
    for suffix in INTERVAL_SUFFIXES:
        if name.endswith(suffix):
            return evret_name(name[:-len(suffix)]), suffix[1:]
    return evret_name(name), "mean"


@dataclass
class TrackedRun:
    """What one run logs (see the module docs); :func:`tracked_run` builds it from results."""

    kind: str
    params: dict[str, Any]
    scores: dict[str, float]
    intervals: dict[str, list[float]] = field(default_factory=dict)
    manifest: dict[str, Any] = field(default_factory=dict)
    # artifact file name -> a function writing it to the path given
    files: dict[str, Callable[[Path], None]] = field(default_factory=dict)


def tracked_run(results: Any, label: str = "run") -> TrackedRun:
    """The one mapping from :class:`~evret_core.results.model.Results` (retrieval or RAG) to what is logged:
    the scores and intervals of :meth:`~evret_core.results.model.Results.score_view`, the redacted
    :meth:`~evret_core.results.model.Results.manifest_dict`, the results file and the HTML report; ``label`` names
    the run in the report."""
    from evret_core.results.model import Results
    from evret_core.results.rag_results import RagResults

    if not isinstance(results, Results):
        raise EvretError(f"log_to_mlflow: expected EvaluationResults or RagResults, got {type(results).__name__}")
    view, manifest = results.score_view(), results.manifest_dict()
    shown = results.redacted()  # a shallow copy: the caller's results stay as they are
    scores = dict(view.scores)
    if isinstance(results, RagResults):
        params = {**shown.config, "confidence_level": results.confidence_level}
        scores.update({f"attribution/{name}": float(n) for name, n in results.attribution.items()})
    else:
        params = {**results.config, "statistics": {**manifest.get("statistics", {}), "seed": manifest.get("seed", 0)}}

    def report(path: Path) -> None:
        from evret_core.report.api import make_report

        path.write_text(make_report({label: shown}, format="html"), encoding="utf-8")

    return TrackedRun(results.KIND, params, scores, dict(view.intervals), manifest,
                      {"results.json": _results_file(results), "report.html": report})


def _results_file(results: Any) -> Callable[[Path], None]:
    """Writes the results JSON as ``--output`` does (:meth:`to_json`: config, stats and manifest redacted)."""

    def write(path: Path) -> None:
        results.to_json(path)

    return write


# -- where the run goes --------------------------------------------------------------------------------------------
def _import_mlflow(option: str) -> Any:
    try:
        import mlflow
    except ImportError:
        raise EvretError(f"{option} needs MLflow, which is not installed: {INSTALL}") from None
    return mlflow


def _local_path(uri: str) -> str | None:
    """The folder of a file-store URI (a path, or ``file:``), or None for any other store."""
    parts = urlsplit(uri)
    if parts.scheme == "file":
        return url2pathname(parts.path)
    if parts.scheme == "" or (len(parts.scheme) == 1 and os.name == "nt"):  # a path (C:\\ on Windows)
        return uri
    return None


def _is_store(folder: Path) -> bool:
    """Whether ``folder`` is empty or an MLflow file store (its ``.trash``, experiments' ``meta.yaml``)."""
    entries = list(folder.iterdir())
    return not entries or (folder / ".trash").is_dir() or any((e / "meta.yaml").is_file() for e in entries)


def check_tracking(uri: str | None = None, inputs: tuple[str, ...] | list[str] = (), option: str = "--mlflow",
                   experiment: str | None = None, contact: bool = True) -> str:
    """The tracking URI a run will be logged to, checked before any work; errors name ``option``.

    ``uri`` None or empty: ``MLFLOW_TRACKING_URI``, else MLflow's default (``sqlite:///mlflow.db``, or ``./mlruns``
    when it holds runs). A path or a ``file:`` URI is MLflow's file store (a folder): it goes through the output
    guard (:func:`evret_core.io.outputs.check_output_folder`: never an input nor inside an input folder) and
    must be new, empty or a store. A ``sqlite:`` database must be writable and not an input, and needs the full
    MLflow package (SQLAlchemy and Alembic). Any other store (an ``http(s)://`` server, Databricks) is contacted
    now, once, for at most :data:`CHECK_TIMEOUT_S` seconds, and so is an existing store: an unreachable or
    failing server, refused credentials, or an ``experiment`` (default ``MLFLOW_EXPERIMENT_NAME``, else
    ``Default``) that was deleted is an error now rather than after the work (``contact=False``: the URI and the
    local checks only, as when the run is logged right away)."""
    mlflow = _import_mlflow(option)
    resolved = uri or os.environ.get("MLFLOW_TRACKING_URI") or str(mlflow.get_tracking_uri())
    folder = _local_path(resolved)
    if folder is not None:
        from evret_core.io.outputs import check_output_folder

        check_output_folder(folder, inputs, option)
        path = Path(folder)
        if path.is_dir() and not _is_store(path):
            raise EvretError(f"{option} {folder}: the folder holds other files, not an MLflow store; give a new "
                             f"folder (or an MLflow store's)")
        store = Path(folder).absolute().as_uri()
        if contact and path.is_dir() and any(path.iterdir()):  # a store with experiments: is the one deleted?
            _check_store(store, experiment, option)
        return store
    parts = urlsplit(resolved)
    if parts.scheme == "sqlite":
        try:
            import alembic  # noqa: F401  (MLflow's SQL store migrates its schema with it)
            import sqlalchemy  # noqa: F401
        except ImportError:
            raise EvretError(f"{option} {resolved}: MLflow's SQLite store needs the full MLflow package "
                             f"(pip install mlflow); with mlflow-skinny give a folder instead, e.g. "
                             f"{option} mlruns") from None
        database = parts.path[1:] if parts.path.startswith("/") else parts.path
        if database and database != ":memory:":
            from evret_core.io.outputs import check_output_path

            check_output_path(database, inputs, option)
            if contact and Path(database).is_file():
                _check_store(resolved, experiment, option)
        return resolved
    if contact:
        _check_store(resolved, experiment, option)
    return resolved


def _secrets(uri: str) -> list[str]:
    """What must not be printed about ``uri``: the command line's and the environment's secrets, and the URI's
    own (its password, and the ``Basic`` header value a server may echo)."""
    from evret_core.io.redact import known_secrets

    return known_secrets([*sys.argv[1:], uri])


def _check_store(uri: str, experiment: str | None, option: str) -> None:
    """Contact the store once, bounded (:data:`CHECK_TIMEOUT_S`, no retry), and look ``experiment`` up: an error
    naming ``option`` and what happened when the store fails or the experiment is deleted."""
    from evret_core.io.redact import redact_text

    name = experiment or os.environ.get("MLFLOW_EXPERIMENT_NAME") or "Default"
    secrets = _secrets(uri)
    shown = redact_text(uri, secrets)
    try:
        with _mlflow_calls(uri, check=True):
            from mlflow.tracking import MlflowClient

            found = MlflowClient(tracking_uri=uri).get_experiment_by_name(name)
    except Exception as exc:  # noqa: BLE001  (whatever the store raises is said in one line)
        raise EvretError(f"{option} {shown}: {redact_text(_describe(exc, CHECK_TIMEOUT_S), secrets)} (checked "
                         f"before the run; nothing was done)") from None
    if found is not None and getattr(found, "lifecycle_stage", "active") == "deleted":
        raise EvretError(f"{option} {shown}: {_deleted(name)}")


def _deleted(name: str) -> str:
    return f"experiment {name!r} is deleted in this store; restore it (mlflow experiments restore) or give another " \
           f"--mlflow-experiment"


def _describe(exc: BaseException, timeout: float) -> str:
    """What went wrong with a call to the store, in a few words (MLflow's message is a URL and a chain of
    urllib3 errors)."""
    text = " ".join(str(exc).split())
    status = getattr(exc, "get_http_status_code", None)
    if type(exc).__name__ == "RestException" and callable(status):
        return f"the tracking server answered HTTP {status()}: {text[:300]}"
    retried = re.search(r"too many (\d{3}) error responses", text)
    if retried:
        return f"the tracking server answered HTTP {retried.group(1)}"
    if "timed out" in text.lower():
        return f"the tracking server did not answer within {timeout:g} s"
    if "Connection refused" in text:
        return "nothing answers at this address (connection refused)"
    if any(s in text for s in ("Name or service not known", "nodename nor servname", "getaddrinfo failed",
                                "Temporary failure in name resolution")):
        return "the server's host name is not known"
    return text[:400] or type(exc).__name__


def _bounds(check: bool) -> dict[str, str]:
    """The ``MLFLOW_HTTP_REQUEST_*`` settings of a call: the check's own, or the user's with Evret's defaults."""
    if check:
        return dict(zip(HTTP_BOUNDS, (str(CHECK_TIMEOUT_S), "0", "0", "0"), strict=True))
    defaults = dict(zip(HTTP_BOUNDS, (str(LOG_TIMEOUT_S), str(LOG_RETRIES), "1", "0"), strict=True))
    return {name: os.environ.get(name) or value for name, value in defaults.items()}


def _log_timeout() -> float:
    try:
        return float(_bounds(check=False)["MLFLOW_HTTP_REQUEST_TIMEOUT"])
    except ValueError:
        return float(LOG_TIMEOUT_S)


@contextmanager
def _mlflow_calls(uri: str, check: bool = False) -> Iterator[None]:
    """Around every call into MLflow: its file store allowed (:func:`_file_store_allowed`), its HTTP requests
    bounded (:func:`_bounds`), its "View run ... at: URL" banner off, and whatever it prints caught and shown on
    standard error with the URI's credentials masked (standard output may be the results JSON: ``--output -``).
    The environment is put back afterwards."""
    settings = {**_bounds(check), "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true"}
    before = {name: os.environ.get(name) for name in settings}
    os.environ.update({name: os.environ.get(name) or value if name.endswith("STDOUT") else value
                       for name, value in settings.items()})
    printed = io.StringIO()
    try:
        with _file_store_allowed(uri), redirect_stdout(printed), redirect_stderr(printed):
            yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if printed.getvalue().strip():
            from evret_core.io.redact import redact_text

            sys.stderr.write(redact_text(printed.getvalue(), _secrets(uri)).rstrip("\n") + "\n")


@contextmanager
def _file_store_allowed(uri: str) -> Iterator[None]:
    """MLflow 3 keeps its file store behind ``MLFLOW_ALLOW_FILE_STORE``; a folder named for ``--mlflow`` is that
    store, so the switch is on while Evret logs to it (and as it was afterwards)."""
    if not uri.startswith("file:"):
        yield
        return
    before = os.environ.get("MLFLOW_ALLOW_FILE_STORE")
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("MLFLOW_ALLOW_FILE_STORE", None)
        else:
            os.environ["MLFLOW_ALLOW_FILE_STORE"] = before


# -- logging -------------------------------------------------------------------------------------------------------
def _flatten(value: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"judge": {"name": ...}}`` as ``{"judge.name": ...}``; each key's dots are kept (``models``' keys such as
    ``judge.model``), its other characters mapped as metric names are."""
    out: dict[str, Any] = {}
    for key, item in value.items():
        name = prefix + ".".join(mlflow_name(part) for part in str(key).split("."))
        if isinstance(item, Mapping) and item:
            out.update(_flatten(item, name + "."))
        else:
            out[name] = item
    return out


def _text(value: Any, limit: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit - 4] + " ..."


def _metric_names(run: TrackedRun) -> dict[str, tuple[str, float]]:
    """MLflow metric name -> (Evret name, value), for every finite score and interval bound."""
    out: dict[str, tuple[str, float]] = {}
    for name, value in run.scores.items():
        bounds = run.intervals.get(name) or []
        for suffix, number in (("", value), *zip(INTERVAL_SUFFIXES, bounds, strict=False)):
            if number is None or not math.isfinite(float(number)):
                continue
            key = mlflow_name(name) + suffix
            if len(key) > MAX_NAME:
                raise EvretError(f"metric {name!r}: its MLflow name is longer than {MAX_NAME} characters")
            out[key] = (name, float(number))
    return out


def log_to_mlflow(results: Any, tracking_uri: str | None = None, experiment: str | None = None,
                  run_name: str | None = None, tags: Mapping[str, str] | None = None,
                  option: str = "MLflow tracking URI", inputs: tuple[str, ...] | list[str] = ()) -> str:
    """Log ``results`` (retrieval or RAG results, or a :class:`TrackedRun`) as one finished MLflow run and return
    its run id.

    ``tracking_uri``: a folder (MLflow's file store), ``sqlite:///...``, a server's URL, or None for
    ``MLFLOW_TRACKING_URI`` / MLflow's default (:func:`check_tracking`). ``experiment`` (default
    ``MLFLOW_EXPERIMENT_NAME``, else ``Default``) is created when missing; a deleted one is an error. ``tags`` are
    added as they are. Every call to the store is bounded (:data:`LOG_TIMEOUT_S`, :data:`LOG_RETRIES`, or the
    ``MLFLOW_HTTP_REQUEST_*`` settings a user made) and MLflow's prints go to standard error, masked. Any failure
    is an :class:`EvretError` naming ``option`` and the URI (credentials masked) and what went wrong; a run that
    failed half-way is marked FAILED in the store. The results themselves are never changed. To find a bad store
    before the work, call :func:`check_tracking` first (the CLI does)."""
    uri = check_tracking(tracking_uri, inputs, option, experiment, contact=False)  # _log's calls are bounded
    run = results if isinstance(results, TrackedRun) else tracked_run(results, run_name or "run")
    metrics = _metric_names(run)  # a name MLflow refuses fails here, before the run exists
    from evret_core.io.redact import redact, redact_text

    secrets = _secrets(uri)
    params = {k: redact_text(_text(v, MAX_PARAM_VALUE), secrets) for k, v in _flatten(redact(run.params)).items()}
    manifest = redact(run.manifest)
    run_tags = {"evret.kind": run.kind, **{f"evret.{k}": redact_text(_text(v, SHORT_TAG), secrets)
                                           for k, v in _flatten(manifest).items()
                                           if isinstance(v, (str, int, float, bool)) and len(str(v)) <= SHORT_TAG
                                           and len(k) <= MAX_NAME - 6}}
    run_tags.update({str(k): str(v) for k, v in (tags or {}).items()})
    shown = redact_text(uri, secrets)
    try:
        with _mlflow_calls(uri):
            return _log(uri, experiment, run_name, run, metrics, params, run_tags, manifest)
    except EvretError as exc:
        raise EvretError(f"{option} {shown}: could not log the run: {redact_text(str(exc), secrets)}") from None
    except Exception as exc:  # the store's own errors (a server's answer, a full disk): one line, not a traceback
        message = _describe(exc, _log_timeout())
        raise EvretError(f"{option} {shown}: could not log the run: {redact_text(message, secrets)}") from None


def _log(uri: str, experiment: str | None, run_name: str | None, run: TrackedRun,
         metrics: dict[str, tuple[str, float]], params: dict[str, str], tags: dict[str, str],
         manifest: dict[str, Any]) -> str:
    import time

    from mlflow.entities import Metric, Param, RunTag
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    name = experiment or os.environ.get("MLFLOW_EXPERIMENT_NAME") or "Default"
    found = client.get_experiment_by_name(name)
    if found is not None and getattr(found, "lifecycle_stage", "active") == "deleted":
        raise EvretError(_deleted(name))
    experiment_id = found.experiment_id if found is not None else client.create_experiment(name)
    created = client.create_run(experiment_id, run_name=run_name or None)
    run_id = str(created.info.run_id)
    try:
        now = int(time.time() * 1000)
        entries = [Metric(key, value, now, 0) for key, (_, value) in metrics.items()]
        for start in range(0, len(entries), 1000):
            client.log_batch(run_id, metrics=entries[start:start + 1000])
        pairs = list(params.items())
        for start in range(0, len(pairs), BATCH):
            client.log_batch(run_id, params=[Param(k, v) for k, v in pairs[start:start + BATCH]])
        pairs = list(tags.items())
        for start in range(0, len(pairs), BATCH):
            client.log_batch(run_id, tags=[RunTag(k, v) for k, v in pairs[start:start + BATCH]])
        with tempfile.TemporaryDirectory(prefix="evret-mlflow-") as folder:
            written = {"manifest.json": lambda p: p.write_text(json.dumps(manifest, indent=2, default=str) + "\n", "utf-8"),
                       "metric_names.json": lambda p: p.write_text(json.dumps(
                           {key: evret for key, (evret, _) in metrics.items()}, indent=2) + "\n", "utf-8"),
                       **run.files}
            for file_name, write in written.items():
                path = Path(folder) / file_name
                write(path)
                client.log_artifact(run_id, str(path))
    except BaseException:
        try:
            with _mlflow_calls(uri, check=True):  # the store is what failed: one short try to mark the run
                client.set_terminated(run_id, "FAILED")
        except Exception:  # the first error is the one to report
            pass
        raise
    client.set_terminated(run_id, "FINISHED")
    return run_id
