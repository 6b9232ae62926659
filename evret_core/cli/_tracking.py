"""``--mlflow [URI]``, ``--mlflow-experiment`` and ``--mlflow-run-name`` of the commands that produce results.

A command adds the options (:func:`add_tracking_arguments`), checks them with its other outputs before any work
(:func:`check_tracking_arguments`: MLflow installed, the store usable and not an input, a server answering and
the experiment not deleted) and logs the run after its results are written and shown (:func:`log_run`), so a
tracking failure never loses the results file: it is one line naming the URI, and the command exits 2. A
``--dry-run`` says that it logs nothing (:func:`note_dry_run`). The mapping itself is
:mod:`evret_core.report.tracking`'s.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from evret_core.contracts.errors import EvretError


def add_tracking_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mlflow", nargs="?", const="", default=None, metavar="URI",
                   help="log the run to MLflow: parameters, scores with intervals, manifest, results and HTML report "
                        "(URI: a folder, sqlite:///mlflow.db or a server; default MLFLOW_TRACKING_URI, else "
                        "MLflow's default; needs pip install mlflow-skinny)")
    p.add_argument("--mlflow-experiment", metavar="NAME", help="with --mlflow: the experiment (created if missing; "
                                                                "default MLFLOW_EXPERIMENT_NAME, else Default)")
    p.add_argument("--mlflow-run-name", metavar="NAME", help="with --mlflow: the run's name (default: MLflow's)")


def check_tracking_arguments(args: argparse.Namespace, inputs: Sequence[str | None]) -> str | None:
    """The tracking URI to log to, checked now against the run's ``inputs``; None without ``--mlflow``."""
    if getattr(args, "mlflow", None) is None:
        for flag in ("mlflow_experiment", "mlflow_run_name"):
            if getattr(args, flag, None) is not None:
                raise EvretError(f"--{flag.replace('_', '-')} goes with --mlflow (where the run is logged)")
        return None
    from evret_core.report.tracking import check_tracking

    return check_tracking(args.mlflow, [str(p) for p in inputs if p], "--mlflow", args.mlflow_experiment)


def note_dry_run(uri: str | None) -> None:
    """With ``--dry-run``: say that the run is not logged to ``uri`` (nothing when there is no ``--mlflow``)."""
    if uri is not None:
        from evret_core.io.redact import known_secrets, redact_text

        print(f"note: --dry-run: nothing is logged to MLflow (--mlflow {redact_text(uri, known_secrets(sys.argv))})",
              file=sys.stderr)


def log_run(args: argparse.Namespace, uri: str | None, results: Any) -> None:
    """Log ``results`` to ``uri`` (from :func:`check_tracking_arguments`; nothing when None) and say where."""
    if uri is None:
        return
    from evret_core.io.redact import known_secrets, redact_text
    from evret_core.report.tracking import log_to_mlflow

    shown = redact_text(uri, known_secrets(sys.argv))
    print(f"logging the run to MLflow at {shown} ...", file=sys.stderr, flush=True)  # it takes seconds
    run_id = log_to_mlflow(results, uri, experiment=args.mlflow_experiment, run_name=args.mlflow_run_name,
                           option="--mlflow")
    print(f"MLflow run {run_id} logged to {shown}", file=sys.stderr)
