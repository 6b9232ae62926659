"""Issue 33, ``--mlflow`` with a tracking server (red-team groups F2 and F3, ML14, ML22 of 2026-11-28): the real
mlflow-skinny client against the small MLflow REST server of ``mlflow_server.py`` on 127.0.0.1.

MLflow's own console lines never reach standard output and never show the URI's password; ``--output -`` stays
one JSON document; the store is contacted before any work (a few seconds at most) and every later call is
bounded, so a failing server is named within seconds and the results file stays written."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from evret_core.cli import main
from evret_core.results.evaluation import EvaluationResults

from .._helpers import one_error
from .._paths import REPO
from .mlflow_server import MlflowServer

pytest.importorskip("mlflow")

EXAMPLES = REPO / "examples"
EVALUATE = ["evaluate", "--config", str(EXAMPLES / "eval.toml"), "--resamples", "20", "--no-progress"]
TRACK_PW = "TrackPW-9090"
ECHO_PW = "EchoPW-4545"


@pytest.fixture(autouse=True)
def _clean_mlflow_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in list(os.environ):
        if name.startswith("MLFLOW_"):
            monkeypatch.delenv(name)
    yield
    os.environ.pop("MLFLOW_ALLOW_FILE_STORE", None)


@pytest.fixture
def server() -> Iterator[MlflowServer]:
    with MlflowServer() as running:
        yield running


def evret(argv: list[str], cwd: Path, env: dict[str, str] | None = None,
          timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``evret ARGV`` in a child process (MLflow prints from its own code: only a process's real streams show
    it), with the timing."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    return subprocess.run([sys.executable, "-m", "evret_core.cli", *argv], cwd=cwd, text=True,
                          capture_output=True, timeout=timeout, env={**environ, **(env or {})})


# -- F2: MLflow's console lines ------------------------------------------------------------------------------------
def test_a_server_run_prints_no_password_and_standard_output_stays_the_json(server: MlflowServer,
                                                                            tmp_path: Path) -> None:
    """ML06, ML06b, ML20: MLflow's "View run ... at: URL" banner (the URI with its password) is not printed on
    standard output; with --output - standard output is exactly the results JSON; the password is nowhere."""
    uri = server.uri("ok", f"u:{TRACK_PW}")
    done = evret([*EVALUATE, "--output", "-", "--mlflow", uri], tmp_path)
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)  # ML06b: one JSON document, nothing after it
    assert results["scores"]["ndcg@10"] > 0
    assert TRACK_PW not in done.stdout + done.stderr
    assert "View run" not in done.stdout
    runs = list(server.runs.values())
    assert len(runs) == 1 and runs[0]["info"]["status"] == "FINISHED"
    assert done.stderr.strip().splitlines()[-2:] == [  # newcomer 15: a line before the wait, one after it
        f"logging the run to MLflow at http://u:***@127.0.0.1:{server.port}/ok ...",
        f"MLflow run {runs[0]['info']['run_id']} logged to http://u:***@127.0.0.1:{server.port}/ok"]
    assert runs[0]["metrics"]["ndcg_at_10"] == pytest.approx(results["scores"]["ndcg@10"], abs=1e-12)
    assert sorted(p.rsplit("/", 1)[1] for p in server.artifacts) == ["manifest.json", "metric_names.json",
                                                                      "report.html", "results.json"]
    auth = {r["auth"] for r in server.requests}
    assert auth == {"Basic " + base64.b64encode(f"u:{TRACK_PW}".encode()).decode()}  # the credentials were used
    # ML20: the URI from MLFLOW_TRACKING_URI and a bare --mlflow
    done = evret([*EVALUATE, "--mlflow"], tmp_path, env={"MLFLOW_TRACKING_URI": uri})
    assert done.returncode == 0, done.stderr
    assert TRACK_PW not in done.stdout + done.stderr and "View run" not in done.stdout


def test_a_server_echoing_the_authorization_header_is_masked_before_any_work(server: MlflowServer,
                                                                              tmp_path: Path) -> None:
    """ML07d: the server's 401 holds 'Basic base64(u:PW)'; the message masks it, and it comes before the run."""
    output = tmp_path / "r.json"
    done = evret([*EVALUATE, "--output", str(output), "--mlflow", server.uri("echo401", f"u:{ECHO_PW}")], tmp_path)
    assert done.returncode == 2
    basic = base64.b64encode(f"u:{ECHO_PW}".encode()).decode()
    assert ECHO_PW not in done.stderr and basic not in done.stderr, done.stderr
    assert done.stderr.strip() == (f"evret: error: --mlflow http://u:***@127.0.0.1:{server.port}/echo401: the "
                                   f"tracking server answered HTTP 401: UNAUTHENTICATED: bad credentials Basic ***"
                                   f" (checked before the run; nothing was done)")
    assert not output.exists()


# -- F3: the store is checked before the work, every call is bounded ----------------------------------------------
@pytest.mark.parametrize(("mode", "said"), [
    ("r500", "the tracking server answered HTTP 500"),
    ("hang", "the tracking server did not answer within 5 s"),
    ("closed", "nothing answers at this address (connection refused)"),
])
def test_a_failing_store_is_found_before_the_work_within_seconds(server: MlflowServer, tmp_path: Path,
                                                                  mode: str, said: str) -> None:
    """ML07, ML07b, ML07c: a closed port, a server answering 500 and one that never answers are each named in
    one line within a few seconds, before the dataset is read; no results file is started."""
    uri = "http://127.0.0.1:1" if mode == "closed" else server.uri(mode)
    output = tmp_path / "r.json"
    started = time.monotonic()
    done = evret([*EVALUATE, "--output", str(output), "--mlflow", uri], tmp_path)
    took = time.monotonic() - started
    assert done.returncode == 2
    line = done.stderr.strip()
    assert line.startswith(f"evret: error: --mlflow {uri}: {said}") and line.endswith(
        "(checked before the run; nothing was done)"), line
    assert len(line.splitlines()) == 1 and not output.exists()
    assert took < 30, took  # the check's own bound is 5 s; the rest is the interpreter starting
    if mode != "closed":
        assert len(server.requests) == 1  # one try: no retries in the check


@pytest.mark.parametrize(("mode", "said"), [("late500", "HTTP 500"), ("latehang", "did not answer within 2 s")])
def test_a_store_failing_after_the_work_is_named_within_seconds_and_the_results_stay(
        server: MlflowServer, tmp_path: Path, mode: str, said: str) -> None:
    """The check passed, then the server fails: MLflow's seven retries with backoff (249 s) are not waited for.
    Evret's bound is one retry (MLFLOW_HTTP_REQUEST_TIMEOUT, 10 s by default; a user's own value is kept: here 2)."""
    output = tmp_path / "r.json"
    started = time.monotonic()
    done = evret([*EVALUATE, "--output", str(output), "--mlflow", server.uri(mode, f"u:{TRACK_PW}")], tmp_path,
                 env={"MLFLOW_HTTP_REQUEST_TIMEOUT": "2"})
    took = time.monotonic() - started
    assert done.returncode == 2
    written, logging, line = done.stderr.strip().splitlines()[-3:]
    assert written == f"results written to {output}" and logging.startswith("logging the run to MLflow at ")
    assert line.startswith(f"evret: error: --mlflow http://u:***@127.0.0.1:{server.port}/{mode}: could not log "
                           f"the run: the tracking server {'answered' if mode == 'late500' else ''}"), line
    assert said in line and TRACK_PW not in done.stderr
    assert EvaluationResults.from_json(output).scores["ndcg@10"] > 0
    assert took < 40, took
    later = [r for r in server.requests if "get-by-name" not in r["path"]]
    assert 1 <= len(later) <= 2  # the call that failed, tried twice at most


def test_the_http_bounds_are_set_for_mlflows_calls_and_put_back(monkeypatch: pytest.MonkeyPatch) -> None:
    from evret_core.report import tracking

    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "33")
    seen = {}
    with tracking._mlflow_calls("http://h:5000", check=False):
        seen["log"] = {k: os.environ.get(k) for k in tracking.HTTP_BOUNDS}
    with tracking._mlflow_calls("http://h:5000", check=True):
        seen["check"] = {k: os.environ.get(k) for k in tracking.HTTP_BOUNDS}
    assert seen["log"]["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "33"  # the user's own setting is kept
    assert seen["log"]["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "1"
    assert seen["check"]["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "5" and seen["check"]["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "0"
    assert os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "33" and "MLFLOW_HTTP_REQUEST_MAX_RETRIES" not in os.environ


def test_python_api_prints_nothing_on_standard_output(server: MlflowServer, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from evret_core.report.tracking import log_to_mlflow

    assert main([*EVALUATE, "--output", str(tmp_path / "r.json")]) == 0
    capsys.readouterr()
    run_id = log_to_mlflow(EvaluationResults.from_json(tmp_path / "r.json"), server.uri("ok", f"u:{TRACK_PW}"),
                           experiment="bees")
    captured = capsys.readouterr()
    assert captured.out == "" and TRACK_PW not in captured.err
    assert server.runs[run_id]["info"]["status"] == "FINISHED" and "bees" in server.experiments


# -- ML14: a deleted experiment is found before the work -------------------------------------------------------------
def test_a_deleted_experiment_is_refused_before_the_work(server: MlflowServer, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "r.json"
    assert main([*EVALUATE, "--output", str(output), "--mlflow", server.uri("deleted"),
                 "--mlflow-experiment", "gone"]) == 2
    assert one_error(capsys) == (f"evret: error: --mlflow {server.uri('deleted')}: experiment 'gone' is deleted "
                                 f"in this store; restore it (mlflow experiments restore) or give another "
                                 f"--mlflow-experiment")
    assert not output.exists()
    # a file store, as in the report
    store = tmp_path / "mlA"
    assert main([*EVALUATE, "--mlflow", str(store), "--mlflow-experiment", "gone"]) == 0
    from mlflow.tracking import MlflowClient

    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    mlflow = MlflowClient(store.absolute().as_uri())
    mlflow.delete_experiment(mlflow.get_experiment_by_name("gone").experiment_id)
    capsys.readouterr()
    assert main([*EVALUATE, "--output", str(output), "--mlflow", str(store), "--mlflow-experiment", "gone"]) == 2
    assert "experiment 'gone' is deleted in this store" in one_error(capsys) and not output.exists()


# -- ML22: --dry-run says that it logs nothing ------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["rag", "evaluate"])
def test_dry_run_says_it_logs_nothing(command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = (["rag", "--config", str(EXAMPLES / "rag" / "rag.toml")] if command == "rag" else EVALUATE[:3])
    store = tmp_path / "mlruns"
    assert main([*argv, "--dry-run", "--mlflow", str(store)]) == 0
    err = capsys.readouterr().err
    assert f"note: --dry-run: nothing is logged to MLflow (--mlflow {store.absolute().as_uri()})" in err
    assert not store.exists()


# -- newcomer item 15: the README says how to open its store with MLflow's own client -----------------------------
def test_the_readmes_line_opens_the_store_with_mlflows_client(tmp_path: Path) -> None:
    import re
    import shlex

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    logged = re.search(r"^evret evaluate .*--mlflow mlruns.*$", readme, flags=re.MULTILINE)
    opened = re.search(r"^MLFLOW_ALLOW_FILE_STORE=true (python -c .*)$", readme, flags=re.MULTILINE)
    assert logged is not None and opened is not None
    (tmp_path / "examples").symlink_to(EXAMPLES, target_is_directory=True)
    assert evret(shlex.split(logged.group(0))[1:], tmp_path).returncode == 0
    argv = shlex.split(opened.group(1))
    environ = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    without = subprocess.run([sys.executable, *argv[1:]], cwd=tmp_path, text=True, capture_output=True,
                             timeout=120, env=environ)
    assert without.returncode != 0 and "MLFLOW_ALLOW_FILE_STORE" in without.stderr  # why the README says it
    done = subprocess.run([sys.executable, *argv[1:]], cwd=tmp_path, text=True, capture_output=True, timeout=120,
                          env={**environ, "MLFLOW_ALLOW_FILE_STORE": "true"})
    assert done.returncode == 0, done.stderr
    assert "'bees'" in done.stdout


def test_a_store_failing_at_logging_time_is_not_said_to_be_before_the_run(server: MlflowServer,
                                                                          tmp_path: Path) -> None:
    """log_to_mlflow (what the CLI calls after the work) does not check again: a failure there says the run
    could not be logged, never "nothing was done"; a deleted experiment found then is named as such."""
    from evret_core.contracts.errors import EvretError
    from evret_core.report.tracking import log_to_mlflow

    assert main([*EVALUATE, "--output", str(tmp_path / "r.json")]) == 0
    results = EvaluationResults.from_json(tmp_path / "r.json")
    with pytest.raises(EvretError) as failed:
        log_to_mlflow(results, server.uri("r500"))
    assert str(failed.value) == (f"MLflow tracking URI {server.uri('r500')}: could not log the run: the tracking "
                                 f"server answered HTTP 500")
    with pytest.raises(EvretError, match="could not log the run: experiment 'gone' is deleted in this store"):
        log_to_mlflow(results, server.uri("deleted"), experiment="gone")
