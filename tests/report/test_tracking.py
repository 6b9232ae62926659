"""Issue 28, experiment tracking: ``--mlflow`` and :func:`evret_core.report.tracking.log_to_mlflow` log a run to a real
local MLflow store (a file store folder), read back here with ``MlflowClient``."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from evret_core.cli import main
from evret_core.contracts.errors import EvretError
from evret_core.report.tracking import evret_name, log_to_mlflow, mlflow_name, split_metric_name
from evret_core.results.evaluation import EvaluationResults
from evret_core.results.rag_results import RagResults
from evret_core.testing.llm_provider import stub_options
from evret_core.testing.llm_stubs import StubLLMServer

from .._helpers import one_error
from .._paths import REPO

pytest.importorskip("mlflow")

EXAMPLES = REPO / "examples"
QUESTIONS, RAG_CORPUS = str(EXAMPLES / "rag" / "questions.jsonl"), str(EXAMPLES / "rag" / "corpus.jsonl")
EVALUATE = ["evaluate", "--config", str(EXAMPLES / "eval.toml"), "--resamples", "50", "--no-progress"]
RAG = ["rag", "--dataset", QUESTIONS, "--corpus", RAG_CORPUS, "--retriever", "bm25", "--generator", "extractive",
       "--resamples", "50", "--no-progress"]


def client(store: Path) -> Any:
    """A reader of the store, as a user would open it (MLflow 3 asks for the file store's opt-in)."""
    from mlflow.tracking import MlflowClient

    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    return MlflowClient(tracking_uri=store.absolute().as_uri())


@pytest.fixture(autouse=True)
def _file_store_switch(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts without the opt-in (as a user's shell does) and leaves none behind."""
    for name in ("MLFLOW_ALLOW_FILE_STORE", "MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME"):
        monkeypatch.delenv(name, raising=False)
    yield
    os.environ.pop("MLFLOW_ALLOW_FILE_STORE", None)


def only_run(store: Path, experiment: str) -> Any:
    mlflow = client(store)
    found = mlflow.get_experiment_by_name(experiment)
    assert found is not None, f"no experiment {experiment!r}"
    runs = mlflow.search_runs([found.experiment_id])
    assert len(runs) == 1
    return runs[0]


def artifact(store: Path, run: Any, name: str) -> str:
    path = client(store).download_artifacts(run.info.run_id, name)
    return Path(path).read_text(encoding="utf-8")


# -- names ---------------------------------------------------------------------------------------------------------
def test_metric_names_map_both_ways_without_ambiguity() -> None:
    assert mlflow_name("ndcg@10") == "ndcg_at_10" and evret_name("ndcg_at_10") == "ndcg@10"
    assert mlflow_name("retrieved/f1") == "retrieved/f1"
    assert mlflow_name("hit_rate@1") == "hit_rate_at_1"
    assert split_metric_name("ndcg_at_10.ci_low") == ("ndcg@10", "ci_low")
    assert split_metric_name("retrieval/recall_at_5.ci_high") == ("retrieval/recall@5", "ci_high")
    # a family that holds "_at_" itself, options, odd condition names: still one name each way
    awkward = ["hit_at_k@5", "a_at@5", "ndcg@10(gain=exponential)", "rbp(p=0.5)", "x.ci_low", "/lead", "a//b",
               "trail/", "é/ü@3", "a_at_", "_at_@_at_"]
    rng = random.Random(0)
    alphabet = "a_t@./(=)- é:"
    awkward += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12))) for _ in range(3000)]
    from mlflow.utils.validation import _validate_metric_name

    mapped: dict[str, str] = {}
    for name in awkward:
        encoded = mlflow_name(name)
        _validate_metric_name(encoded)  # MLflow's own check of metric names
        _validate_metric_name(encoded + ".ci_high")
        assert evret_name(encoded) == name and split_metric_name(encoded + ".ci_low") == (name, "ci_low")
        assert mapped.setdefault(encoded, name) == name, f"{name!r} and {mapped[encoded]!r} share {encoded!r}"


# -- evret evaluate --mlflow ----------------------------------------------------------------------------------------
def test_evaluate_logs_params_scores_intervals_manifest_and_report(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    store, output = tmp_path / "mlruns", tmp_path / "results.json"
    assert main([*EVALUATE, "--output", str(output), "--mlflow", str(store), "--mlflow-experiment", "bees",
                 "--mlflow-run-name", "bm25 token-overlap"]) == 0
    assert f"logged to {store.absolute().as_uri()}" in capsys.readouterr().err
    assert "MLFLOW_ALLOW_FILE_STORE" not in os.environ  # the opt-in was Evret's, for its own call only
    results = json.loads(output.read_text(encoding="utf-8"))
    run = only_run(store, "bees")
    assert run.info.run_name == "bm25 token-overlap" and run.info.status == "FINISHED"
    metrics = run.data.metrics
    assert set(results["scores"]) == {"hit_rate@1", "hit_rate@5", "recall@5", "precision@5", "mrr@10", "ndcg@10"}
    for name, value in results["scores"].items():
        low, high = results["intervals"][name]
        key = mlflow_name(name)
        assert (metrics[key], metrics[f"{key}.ci_low"], metrics[f"{key}.ci_high"]) == (value, low, high)
    assert len(metrics) == 3 * len(results["scores"])
    assert metrics["ndcg_at_10"] == results["scores"]["ndcg@10"]
    params = run.data.params
    assert params["retriever.name"] == "bm25" and params["judge.name"] == "token-overlap"
    assert params["statistics.n_resamples"] == "50" and params["statistics.confidence_level"] == "0.95"
    assert json.loads(params["metrics"]) == results["config"]["metrics"]
    manifest = results["manifest"]
    tags = run.data.tags
    assert tags["evret.kind"] == "retrieval" and tags["evret.dataset.hash"] == manifest["dataset"]["hash"]
    assert tags["evret.evret_version"] == manifest["evret_version"] and tags["evret.judge.name"] == "token-overlap"
    names = {a.path for a in client(store).list_artifacts(run.info.run_id)}
    assert names == {"results.json", "manifest.json", "report.html", "metric_names.json"}
    assert json.loads(artifact(store, run, "manifest.json")) == manifest
    logged = EvaluationResults.from_json(artifact(store, run, "results.json"))
    assert logged.scores == results["scores"] and logged.intervals == results["intervals"]
    assert json.loads(artifact(store, run, "metric_names.json"))["ndcg_at_10.ci_low"] == "ndcg@10"
    html = artifact(store, run, "report.html")
    assert html.lstrip().lower().startswith("<!doctype html>") and 'id="metrics"' in html
    assert all(name in html for name in results["scores"]) and "bm25 token-overlap" in html


def test_the_logged_report_renders_in_a_browser(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ..results.test_html_report import SECTIONS, render

    store = tmp_path / "mlruns"
    assert main([*EVALUATE, "--mlflow", str(store), "--mlflow-run-name", "bm25"]) == 0
    run = only_run(store, "Default")
    page = Path(client(store).download_artifacts(run.info.run_id, "report.html"))
    dom, console = render(page, tmp_path)
    assert console == [] and 'data-ready="yes"' in dom  # no script error, the page's script ran to its end
    assert all(f'id="{section}"' in dom for section in SECTIONS if section != "comparison")
    assert "ndcg@10" in dom and "bm25" in dom


def test_without_a_value_the_run_goes_to_mlflow_tracking_uri(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "from-env"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", str(store))
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "env experiment")
    assert main([*EVALUATE, "--mlflow"]) == 0
    assert only_run(store, "env experiment").data.tags["evret.kind"] == "retrieval"
    capsys.readouterr()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", str(EXAMPLES / "eval.toml"))  # the guard checks that URI too
    assert main([*EVALUATE, "--mlflow"]) == 2
    assert "is also an input of this run" in one_error(capsys)


def test_a_second_run_joins_the_experiment(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "mlruns"
    for name in ("first", "second"):
        assert main([*EVALUATE, "--mlflow", str(store), "--mlflow-experiment", "e", "--mlflow-run-name", name]) == 0
    mlflow = client(store)
    runs = mlflow.search_runs([mlflow.get_experiment_by_name("e").experiment_id])
    assert sorted(r.info.run_name for r in runs) == ["first", "second"]


# -- evret rag --mlflow ---------------------------------------------------------------------------------------------
def test_rag_logs_every_condition_with_intervals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store, output = tmp_path / "mlruns", tmp_path / "rag.json"
    assert main([*RAG, "--output", str(output), "--mlflow", str(store), "--mlflow-experiment", "help desk"]) == 0
    results = RagResults.from_json(output)
    flat = results.score_view()
    run = only_run(store, "help desk")
    metrics = run.data.metrics
    assert {"gold/f1", "retrieved/f1", "retrieval/recall@5"} <= set(flat.scores)
    for name, value in flat.scores.items():
        key = mlflow_name(name)
        assert metrics[key] == value, name
        if name in flat.intervals:
            assert [metrics[f"{key}.ci_low"], metrics[f"{key}.ci_high"]] == flat.intervals[name]
    assert {k: v for k, v in metrics.items() if k.startswith("attribution/")} == \
        {f"attribution/{k}": float(v) for k, v in results.attribution.items()}
    assert run.data.params["generator.name"] == "extractive" and run.data.params["confidence_level"] == "0.95"
    assert run.data.tags["evret.kind"] == "rag" and run.data.tags["evret.num_questions"] == str(len(results.per_question))
    assert RagResults.from_json(artifact(store, run, "results.json")).generation == results.generation
    html = artifact(store, run, "report.html")
    assert html.lstrip().lower().startswith("<!doctype html>") and "retrieved" in html and "f1" in html.lower()


# -- the Python API ------------------------------------------------------------------------------------------------
def test_python_api_logs_retrieval_and_rag_results_alike(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*EVALUATE, "--output", str(tmp_path / "r.json")]) == 0
    assert main([*RAG, "--output", str(tmp_path / "rag.json")]) == 0
    store = tmp_path / "store"
    retrieval = EvaluationResults.from_json(tmp_path / "r.json")
    first = log_to_mlflow(retrieval, str(store), experiment="api", run_name="r", tags={"team": "search"})
    second = log_to_mlflow(RagResults.from_json(tmp_path / "rag.json"), store.absolute().as_uri(),
                           experiment="api", run_name="rag")
    assert "MLFLOW_ALLOW_FILE_STORE" not in os.environ
    mlflow = client(store)
    one, two = mlflow.get_run(first), mlflow.get_run(second)
    assert one.data.tags["team"] == "search" and one.info.run_name == "r" and two.data.tags["evret.kind"] == "rag"
    assert one.data.metrics["recall_at_5"] == retrieval.scores["recall@5"]
    assert "retrieved/correct" in two.data.metrics
    with pytest.raises(EvretError, match="expected EvaluationResults or RagResults"):
        log_to_mlflow({"ndcg@10": 1.0}, str(store))


# -- no secrets in the store ---------------------------------------------------------------------------------------
# the planted keys and the stub LLM server of the guards' secret tests
from ..cli.test_guards import OPTION_KEY, PASSWORD, QUERY_KEY, stub  # noqa: E402, F401, F811  (stub: the fixture)


def test_no_credential_reaches_any_file_of_the_store(stub: StubLLMServer, tmp_path: Path,  # noqa: F811
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    options = stub_options(stub)
    host = options["base_url"].split("://", 1)[1]
    secret_options = [f"provider={options['provider']}", f"model={options['model']}", "cache=false",
                      f"base_url=http://user:{PASSWORD}@{host}?api-key={QUERY_KEY}", f"api_key={OPTION_KEY}"]
    argv = ["rag", "--dataset", QUESTIONS, "--corpus", RAG_CORPUS, "--conditions", "gold", "--resamples", "10",
            "--generator", "llm", "--claim-judge", "llm", "--no-progress", "--mlflow", str(tmp_path / "mlruns")]
    for flag in ("--generator-option", "--claim-judge-option"):
        argv += [x for option in secret_options for x in (flag, option)]
    assert main(argv) == 0
    assert stub.requests  # the LLM parts were called through those URLs
    captured = capsys.readouterr()
    files = [p for p in (tmp_path / "mlruns").rglob("*") if p.is_file()]
    assert len(files) > 20  # params, tags, metrics and artifacts, each a file in the store
    for path in files:
        data = path.read_bytes()
        for secret in (PASSWORD, QUERY_KEY, OPTION_KEY):
            assert secret.encode() not in data, f"{secret} in {path}"
    for secret in (PASSWORD, QUERY_KEY, OPTION_KEY):
        assert secret not in captured.out + captured.err
    run = only_run(tmp_path / "mlruns", "Default")
    assert run.data.params["generator.base_url"].startswith("http://user:***@")  # masked, not dropped
    assert run.data.params["generator.base_url"].endswith("?api-key=***")


def test_paths_under_the_current_folder_are_not_masked_as_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """The shell's PWD ("pwd" reads as password) is no secret: a parameter or a message naming a file under the
    current folder keeps its path; a variable holding a real password still is one."""
    from evret_core.io.redact import known_secrets

    assert known_secrets(environ={"PWD": "/home/me/project", "OLDPWD": "/home/me", "DB_PWD": "hunter22"}) == \
        ["hunter22"]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PWD", str(tmp_path))
    run_file = tmp_path / "run.trec"
    run_file.write_text("q1 Q0 d1 1 1.0 tag\n", encoding="utf-8")
    (tmp_path / "qrels").write_text("q1 0 d1 1\n", encoding="utf-8")
    assert main(["trec", str(tmp_path / "qrels"), str(run_file), "-m", "ap", "--mlflow", str(tmp_path / "m")]) == 0
    assert only_run(tmp_path / "m", "Default").data.params["run"] == str(run_file)
    capsys.readouterr()
    assert main(["trec", str(tmp_path / "qrels"), str(run_file), "--mlflow", str(run_file)]) == 2
    assert f"--mlflow {run_file}: is also an input" in one_error(capsys)


# -- errors: before any work, one line --------------------------------------------------------------------------------
BLOCK = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ImportError("No module named " + repr(name))
sys.meta_path.insert(0, Block())
from evret_core.cli import main
sys.exit(main(sys.argv[1:]))
"""


def run_blocked(blocked: set[str], argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", BLOCK.format(blocked=blocked), *argv], cwd=cwd, text=True,
                          capture_output=True, timeout=120, env={**os.environ, "PYTHONWARNINGS": "error"})


@pytest.mark.parametrize("command", [EVALUATE, RAG])
def test_without_mlflow_the_option_is_one_line_before_any_work(command: list[str], tmp_path: Path) -> None:
    output = tmp_path / "out.json"
    done = run_blocked({"mlflow"}, [*command, "--output", str(output), "--mlflow", str(tmp_path / "m")], tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == ("evret: error: --mlflow needs MLflow, which is not installed: "
                                   "pip install mlflow-skinny")
    assert not output.exists() and not (tmp_path / "m").exists()  # refused before the run, not after it


def test_without_mlflow_the_python_api_raises_an_evret_error(tmp_path: Path) -> None:
    assert main([*EVALUATE, "--output", str(tmp_path / "r.json")]) == 0
    code = BLOCK.split("from evret_core.cli")[0] + (
        "from evret_core.contracts.errors import EvretError\n"
        "from evret_core.results.evaluation import EvaluationResults\n"
        "from evret_core.report.tracking import log_to_mlflow\n"
        "try:\n"
        f"    log_to_mlflow(EvaluationResults.from_json({str(tmp_path / 'r.json')!r}), 'store')\n"
        "except EvretError as exc:\n"
        "    print(exc)\n")
    done = subprocess.run([sys.executable, "-c", code.format(blocked={"mlflow"})], cwd=tmp_path, text=True,
                          capture_output=True, timeout=120)
    assert done.stdout.strip() == ("MLflow tracking URI needs MLflow, which is not installed: "
                                   "pip install mlflow-skinny"), done.stderr
    assert not (tmp_path / "store").exists()


def test_sqlite_store_without_the_full_mlflow_package_is_refused_first(tmp_path: Path) -> None:
    done = run_blocked({"alembic"}, [*EVALUATE, "--output", str(tmp_path / "o.json"), "--mlflow",
                                     f"sqlite:///{tmp_path}/mlflow.db"], tmp_path)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "needs the full MLflow package (pip install mlflow)" in done.stderr
    assert not (tmp_path / "o.json").exists()


def test_a_store_that_is_an_input_or_another_folder_is_refused(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    dataset = tmp_path / "dataset.jsonl"
    dataset.write_bytes((EXAMPLES / "dataset.jsonl").read_bytes())
    base = ["evaluate", "--dataset", str(dataset), "--retriever", "bm25", "--retriever-option",
            f"corpus={EXAMPLES / 'corpus.jsonl'}", "--metric", "recall@5", "--judge", "token-overlap"]
    assert main([*base, "--mlflow", str(dataset)]) == 2
    assert "--mlflow" in one_error(capsys) and dataset.read_bytes() == (EXAMPLES / "dataset.jsonl").read_bytes()
    assert main([*base, "--mlflow", f"file://{dataset}"]) == 2
    assert "is also an input of this run" in one_error(capsys)
    assert main([*base, "--mlflow", str(EXAMPLES / "corpus.jsonl")]) == 2  # named by a retriever option
    assert "is also an input of this run" in one_error(capsys)
    assert main([*base, "--mlflow", str(tmp_path)]) == 2  # a folder of other files, not a store
    assert "not an MLflow store" in one_error(capsys)
    assert main([*base, "--mlflow", str(tmp_path / "no" / "such")]) == 2
    assert "does not exist" in one_error(capsys)
    assert main([*base, "--mlflow-experiment", "x"]) == 2
    assert one_error(capsys) == "evret: error: --mlflow-experiment goes with --mlflow (where the run is logged)"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dataset.jsonl"]


class RefusingServer(BaseHTTPRequestHandler):
    """An MLflow server that refuses every request (403, MLflow's error body)."""

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        body = json.dumps({"error_code": "PERMISSION_DENIED", "message": "tracking is closed"}).encode()
        self.send_response(403)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET

    def log_message(self, *args: Any) -> None:
        pass


def test_a_refusing_server_is_one_line_before_the_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The server is asked before the run (issue 33): its refusal is one line with the password masked, and no
    results file is begun. A failure after the work keeps the results: test_tracking_server.py."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), RefusingServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        uri = f"http://user:{PASSWORD}@127.0.0.1:{server.server_address[1]}"
        output = tmp_path / "results.json"
        assert main([*EVALUATE, "--output", str(output), "--mlflow", uri]) == 2
    finally:
        server.shutdown()
        server.server_close()
    err = capsys.readouterr().err
    assert "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert line == (f"evret: error: --mlflow http://user:***@127.0.0.1:{server.server_address[1]}: the tracking "
                    f"server answered HTTP 403: PERMISSION_DENIED: tracking is closed (checked before the run; "
                    f"nothing was done)")
    assert not output.exists()


# -- evret trec --mlflow --------------------------------------------------------------------------------------------
def test_trec_logs_the_all_values_and_the_per_query_document(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from evret_core.testing.shared_data import shared_data

    qrels = shared_data("datasets", "trec_eval", "qrels.test", what="trec_eval's test suite")
    run_file = qrels.parent / "results.test"
    store = tmp_path / "mlruns"
    assert main(["trec", str(qrels), str(run_file), "-m", "ndcg@10", "-m", "ap", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert main(["trec", str(qrels), str(run_file), "-m", "ndcg@10", "-m", "ap", "--mlflow", str(store),
                 "--mlflow-run-name", "trec"]) == 0
    run = only_run(store, "Default")
    assert run.data.metrics == {"ndcg_at_10": printed["all"]["ndcg@10"], "ap": printed["all"]["ap"]}
    assert json.loads(run.data.params["metrics"]) == ["ndcg@10", "ap"] and run.data.params["qrels"] == str(qrels)
    assert run.data.tags["evret.kind"] == "trec" and run.data.tags["evret.run_tag"] == printed["run"]
    logged = json.loads(artifact(store, run, "results.json"))
    assert logged["all"] == printed["all"] and len(logged["per_query"]) == printed["num_q"]
