"""Issue 24 (hardening, round 3): the newer commands get the care ``evaluate`` has. One redaction rule for every
file written, one output guard for every command that writes, bad input refused before any work, and one-line
errors instead of tracebacks. Case ids (SEC3, C09, A14, F23...) are those of the red-team report of 2026-11-24."""

from __future__ import annotations

import argparse
import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from evret_core.cli import main
from evret_core.testing.llm_provider import stub_options
from evret_core.testing.llm_stubs import StubLLMServer, isolate_llm_env
from evret_core.testing.rag_stub import rag_responder

from .._helpers import one_error
from .._paths import REPO

EXAMPLE = REPO / "examples" / "rag"
QUESTIONS = str(EXAMPLE / "questions.jsonl")
CORPUS = str(EXAMPLE / "corpus.jsonl")
GOLD_RUN = ["rag", "--dataset", QUESTIONS, "--corpus", CORPUS, "--generator", "extractive", "--conditions", "gold",
            "--resamples", "10"]

PASSWORD, QUERY_KEY, OPTION_KEY = "PASSWORD-1234567", "QUERYKEY-7654321", "sk-OPTKEY-999999"


@pytest.fixture
def stub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[StubLLMServer]:
    isolate_llm_env(monkeypatch, tmp_path, "EVRET_STUB_API_KEY")
    with StubLLMServer(rag_responder()) as server:
        yield server


def _secret_options(server: StubLLMServer) -> list[str]:
    """LLM options with credentials in the URL's user info, in a query parameter and in an option."""
    options = stub_options(server)
    host = options["base_url"].split("://", 1)[1]
    return [f"provider={options['provider']}", f"model={options['model']}", "cache=false",
            f"base_url=http://user:{PASSWORD}@{host}?api-key={QUERY_KEY}", f"api_key={OPTION_KEY}"]


# -- 1. one redaction rule for every file written (SEC3, SEC5, SEC6, SEC7) ---------------------------------------
def test_rag_writes_no_credentials_into_any_file(stub: StubLLMServer, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["rag", "--dataset", QUESTIONS, "--corpus", CORPUS, "--conditions", "gold", "--resamples", "10",
            "--adversarial", "missing-gold", "--write-cases", str(tmp_path / "cases.jsonl"),
            "--output", str(tmp_path / "rag.json"), "--generator", "llm", "--claim-judge", "llm",
            "--relevance", "llm"]
    for flag in ("--generator-option", "--claim-judge-option", "--relevance-option"):
        argv += [x for option in _secret_options(stub) for x in (flag, option)]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert stub.requests  # the parts did call the LLM through those URLs
    written = {name: (tmp_path / name).read_text(encoding="utf-8") for name in ("rag.json", "cases.jsonl")}
    for where, text in {**written, "stdout": captured.out, "stderr": captured.err}.items():
        for secret in (PASSWORD, QUERY_KEY, OPTION_KEY):
            assert secret not in text, f"{secret} in {where}"
    config = json.loads(written["rag.json"])["config"]
    for part in ("generator", "claim_judge", "relevance"):
        assert "user:***@" in json.dumps(config[part]) and "api-key=***" in json.dumps(config[part]), config[part]


def test_calibration_json_has_no_credentials(stub: StubLLMServer, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    labels = tmp_path / "labels.jsonl"
    labels.write_text(json.dumps({"query_id": "q", "query": "When?", "expected": "9 am",
                                  "retrieved_text": "It opens at 9 am.", "label": True}) + "\n")
    argv = ["calibrate", "--labels", str(labels), "--judge", "llm", "-o", str(tmp_path / "cal.json"), "--json"]
    argv += [x for option in _secret_options(stub) for x in ("--judge-option", option)]
    main(argv)
    captured = capsys.readouterr()
    text = (tmp_path / "cal.json").read_text(encoding="utf-8")
    assert "user:***@" in text
    for secret in (PASSWORD, QUERY_KEY, OPTION_KEY):
        assert secret not in text + captured.out + captured.err


def test_one_rule_for_names_urls_and_known_values() -> None:
    from evret_core.io.redact import is_secret_name, known_secrets, redact_text
    from evret_core.llm.providers import redact as provider_redact

    assert all(is_secret_name(n) for n in ("PGPASSWORD", "authtoken", "clientsecret", "OPENAI_API_KEY"))
    assert not any(is_secret_name(n) for n in ("max_tokens", "keyword", "tokenizer", "XAUTHORITY"))
    argv = ["rag", "--generator-option", "base_url=http://h/v1?api-key=QPARAM-555555", "--api-key", "FLAGKEY-66666",
            "--judge-option=api_key=EQKEY-7777777", "--dataset", "http://u:URLPASS-888888@h/d.jsonl"]
    found = known_secrets(argv, {"PGPASSWORD": "pg-secret-1", "HOME": "/home/someone"})
    basic = base64.b64encode(b"u:URLPASS-888888").decode()  # the Authorization header sent for the URL's user
    assert set(found) == {"QPARAM-555555", "FLAGKEY-66666", "EQKEY-7777777", "URLPASS-888888", "pg-secret-1", basic}
    text = "failed: QPARAM-555555 at http://x:y@h/?token=abc and EQKEY-7777777"
    assert redact_text(text, found) == "failed: *** at http://x:***@h/?token=*** and ***"
    # the providers' helper is the same rule: a known key and URL credentials
    assert provider_redact("HTTP 401 for sk-abcdef at http://a:b@h/v1", "sk-abcdef") == "HTTP 401 for *** at http://a:***@h/v1"


# -- 2. one output guard for every command that writes -----------------------------------------------------------
OUTPUT_OPTIONS = {"output", "write_cases", "write_traces", "save_threshold", "mlflow", "report"}
"""The destinations of options that write a file; every command that has one is in GUARDED below."""


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    """Copies of input files a command might destroy: each test checks its copy is intact afterwards."""
    made = {
        "dataset": (REPO / "examples" / "dataset.jsonl").read_text(encoding="utf-8"),
        "corpus": (REPO / "examples" / "corpus.jsonl").read_text(encoding="utf-8"),
        "answers": "".join(json.dumps({"question_id": f"r{i:02d}", "text": "5 pm"}) + "\n" for i in range(1, 14)),
        "labels": json.dumps({"query_id": "q", "query": "When?", "expected": "9 am",
                              "retrieved_text": "It opens at 9 am.", "label": True}) + "\n",
        "records": json.dumps({"input": "2+2?", "output": "4", "target": "4"}) + "\n",
        "config": '[judge]\nname = "token-overlap"\n',
        "traces": json.dumps({"trace_id": "t1", "relevant_doc_ids": ["d1"], "hops": [{"query": "q",
                                                                                    "retrieved": ["d1"]}]}) + "\n",
        "pipeline": '[[stages]]\nname = "bm25"\nretriever = { name = "bm25", options = { corpus = "corpus.jsonl" } }\n',
    }
    out = {}
    for name, text in made.items():
        path = tmp_path / f"{name}.{'toml' if name in ('config', 'pipeline') else 'jsonl'}"
        path.write_text(text, encoding="utf-8")
        out[name] = path
    results = tmp_path / "results.json"
    assert main(["evaluate", "--dataset", str(out["dataset"]), "--retriever", "bm25", "--retriever-option",
                 f"corpus={out['corpus']}", "--metric", "recall@3", "--resamples", "10", "--no-progress",
                 "--output", str(results)]) == 0
    out["results"] = results
    return out


RAG = ["rag", "--dataset", QUESTIONS, "--corpus", CORPUS, "--conditions", "gold", "--resamples", "10"]
GUARDED: dict[tuple[str, str], list[tuple[list[str], str]]] = {
    # (command, option) -> [(argv, the input it must not destroy)]: output == one of the command's inputs
    ("evaluate", "output"): [(["evaluate", "--dataset", "{dataset}", "--retriever", "bm25", "--retriever-option",
                               "corpus={corpus}", "--metric", "recall@3", "--output", "{corpus}"], "corpus")],
    ("evaluate", "mlflow"): [(["evaluate", "--dataset", "{dataset}", "--retriever", "bm25", "--retriever-option",
                               "corpus={corpus}", "--metric", "recall@3", "--mlflow", "{corpus}"], "corpus")],
    ("evaluate", "report"): [(["evaluate", "--dataset", "{dataset}", "--pipeline", "{pipeline}", "--metric",
                                "recall@3", "--report", "{corpus}"], "corpus")],
    ("rag", "output"): [([*RAG, "--generator", "{answers}", "--output", "{answers}"], "answers")],  # A14
    ("rag", "mlflow"): [([*RAG, "--generator", "{answers}", "--mlflow", "{answers}"], "answers")],
    ("trec", "mlflow"): [(["trec", "{dataset}", "{corpus}", "--mlflow", "{corpus}"], "corpus")],  # before reading
    ("rag", "write_cases"): [
        ([*RAG, "--generator", "{answers}", "--adversarial", "missing-gold", "--write-cases", "{answers}"],
         "answers"),  # A15
        ([*RAG, "--generator", "extractive", "--adversarial", "missing-gold", "--write-cases", "{results}",
          "--output", "{results}"], "results"),  # A16: the two outputs of one run
    ],
    ("calibrate", "output"): [
        (["calibrate", "--labels", "{labels}", "-o", "{labels}"], "labels"),  # C09
        (["calibrate", "--plan", "5", "--results", "{results}", "-o", "{results}"], "results"),  # C10
        (["calibrate", "--results", "{results}", "--ppi-truth", "{config}", "-o", "{config}"], "config"),  # C10b
    ],
    ("calibrate", "save_threshold"): [
        (["calibrate", "--labels", "{labels}", "--save-threshold", "{config}", "-o", "{config}"], "config"),
        (["calibrate", "--labels", "{labels}", "--save-threshold", "{labels}"], "labels"),
    ],
    ("fuse", "output"): [(["fuse", "{corpus}", "{dataset}", "-o", "{dataset}"], "dataset")],  # before reading
    ("generate", "output"): [(["generate", "--corpus", "{corpus}", "-n", "2", "--output", "{corpus}"], "corpus")],
    ("judge", "output"): [(["judge", "--queries", "{dataset}", "--corpus", "{corpus}", "--run", "{results}",
                            "--judge", "relevance", "-o", "{corpus}"], "corpus")],
    ("report", "output"): [(["report", "{results}", "--output", "{results}"], "results")],
    ("score", "output"): [(["score", "{records}", "--evaluator", "exact", "--output", "{records}"],
                           "records")],
    ("trace", "output"): [(["trace", "--traces", "{traces}", "--output", "{traces}"], "traces")],
    ("trace", "write_traces"): [
        (["trace", "--traces", "{traces}", "--write-traces", "{traces}"], "traces"),
        (["trace", "--traces", "{traces}", "--write-traces", "{results}", "--output", "{results}"], "results"),
    ],
}


def test_every_command_that_writes_is_in_the_guard_table() -> None:
    """A new command (or option) that writes a file fails here until its output is checked like the others."""
    from evret_core.cli import build_parser

    def writing(parser: argparse.ArgumentParser, command: str) -> set[tuple[str, str]]:
        found = set()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):  # commands, and subcommands such as `cache clear`
                for name, sub in action.choices.items():
                    found |= writing(sub, f"{command} {name}".strip())
            elif action.dest in OUTPUT_OPTIONS or (action.option_strings and "-o" in action.option_strings):
                found.add((command, action.dest))
        return found

    assert writing(build_parser(), "") == set(GUARDED)


@pytest.mark.parametrize(("argv", "victim"), [case for cases in GUARDED.values() for case in cases],
                         ids=[f"{c}-{o}-{i}" for (c, o), cases in GUARDED.items() for i in range(len(cases))])
def test_no_command_writes_over_its_own_input(files: dict[str, Path], capsys: pytest.CaptureFixture[str],
                                              argv: list[str], victim: str) -> None:
    before = files[victim].read_bytes()
    capsys.readouterr()
    assert main([a.format(**files) for a in argv]) == 2
    line = one_error(capsys)
    assert "is also an input of this run" in line or "writes to the same file" in line, line
    assert files[victim].read_bytes() == before


def test_calibrate_refuses_an_unwritable_output_before_any_llm_call(  # C11b
        stub: StubLLMServer, files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["calibrate", "--labels", str(files["labels"]), "--judge", "llm", "-o", str(tmp_path / "no" / "x.json")]
    argv += [x for option in _secret_options(stub) for x in ("--judge-option", option)]
    capsys.readouterr()
    assert main(argv) == 2
    assert "--output" in one_error(capsys) and stub.requests == []


def test_rag_writes_its_files_before_printing(tmp_path: Path) -> None:  # F23: `evret rag --output x.json | true`
    output = tmp_path / "x.json"
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-m", "evret_core.cli", *GOLD_RUN, "--output", str(output)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environ)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before anything is printed
    with proc.stderr:
        err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141 and "Traceback" not in err
    assert json.loads(output.read_text(encoding="utf-8"))["schema"] == "evret-rag"


def test_rag_output_dash_keeps_the_table_off_standard_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*GOLD_RUN, "--output", "-"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["schema"] == "evret-rag" and "questions.jsonl: 13 questions" in captured.err


# -- 3. bad input found before the work, not after it ------------------------------------------------------------
def test_write_cases_without_adversarial_conditions_fails_before_any_llm_call(  # F22, F22b
        stub: StubLLMServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [*RAG, "--generator", "llm", "--write-cases", str(tmp_path / "c.jsonl"),
            "--output", str(tmp_path / "r.json")]
    argv += [x for option in _secret_options(stub) for x in ("--generator-option", option)]
    capsys.readouterr()
    assert main(argv) == 2
    assert "--write-cases: the run has no adversarial conditions" in one_error(capsys)
    assert stub.requests == [] and not (tmp_path / "c.jsonl").exists()


@pytest.mark.parametrize(("argv", "message"), [
    ([*GOLD_RUN, "--fail-under", "gold/corect=0.5"],  # F18
     r"--fail-under names gold/corect, which this run does not compute \(did you mean gold/correct\?\)"),
    ([*GOLD_RUN, "--fail-under", "retrieval/recall@5=0.5"], "--fail-under names retrieval/recall@5"),  # no retriever
    ([*GOLD_RUN, "--fail-under", "gold/answer_judge=0.5"], "--fail-under names gold/answer_judge"),  # no --answer-judge
    ([*GOLD_RUN, "--relevance", "none", "--fail-under", "gold/answer_relevance=0.5"],
     "--fail-under names gold/answer_relevance"),
    ([*GOLD_RUN, "--adversarial", "missing-gold", "--gate-metric", "injection/correct", "--baseline", "{base}"],
     "--gate-metric names injection/correct"),
    (["evaluate", "--dataset", "{dataset}", "--retriever", "bm25", "--retriever-option", "corpus={corpus}",
      "--metric", "recall@3", "--gate-metric", "bogus@5", "--baseline", "{base}"],  # F16
     r"--gate-metric names bogus@5, which this run does not compute \(it computes recall@3\); add --metric"),
])
def test_gates_naming_a_score_the_run_cannot_compute_fail_before_work(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        argv: list[str], message: str) -> None:
    import re

    from evret_core.rag import QuestionSet

    def no_work(*args: object, **kwargs: object) -> None:
        raise AssertionError("the run started")

    monkeypatch.setattr(QuestionSet, "load", no_work)
    monkeypatch.setattr("evret_core.evaluation.config.EvaluateConfig.load_dataset", no_work)
    capsys.readouterr()
    assert main([a.format(base=files["results"], **files) for a in argv]) == 2
    assert re.search(message, one_error(capsys))


def test_a_gate_on_a_score_the_run_computes_still_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*GOLD_RUN, "--adversarial", "missing-gold", "--fail-under", "missing-gold/correct=0",
                 "--fail-under", "gold/has_ans_f1=0", "--fail-under", "gold/answer_relevance=0"]) == 0
    assert "gates passed" in capsys.readouterr().err


# -- 4. a negative seed is a one-line error, not a numpy traceback -----------------------------------------------
@pytest.mark.parametrize("argv", [
    [*GOLD_RUN, "--seed", "-1"],  # C08g
    ["calibrate", "--labels", "{labels}", "--seed", "-5"],  # C08c
    ["calibrate", "--plan", "5", "--results", "{results}", "-o", "-", "--seed", "-1"],  # C08e
])
def test_negative_seed_is_refused_like_evaluate_does(files: dict[str, Path], capsys: pytest.CaptureFixture[str],
                                                     argv: list[str]) -> None:
    capsys.readouterr()
    assert main([a.format(**files) for a in argv]) == 2
    assert one_error(capsys).startswith("evret: error: --seed must be an integer from 0 to 9223372036854775807, got -")


def test_a_config_files_seed_is_named_with_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    toml = tmp_path / "rag.toml"
    toml.write_text(f'dataset = "{QUESTIONS}"\ncorpus = "{CORPUS}"\ngenerator = "extractive"\n'
                    'conditions = ["gold"]\nseed = -1\n', encoding="utf-8")
    assert main(["rag", "--config", str(toml)]) == 2
    assert "rag.toml: option 'seed': must be an integer from 0 to" in one_error(capsys)


# -- 5. what a newcomer met --------------------------------------------------------------------------------------
def test_install_hint_names_the_plugins_folder_of_this_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    from evret_core.contracts.errors import UnknownNameError
    from evret_core.plugins.loading import KNOWN_DISTRIBUTIONS
    from evret_core.plugins.registry import create_judge

    monkeypatch.setitem(KNOWN_DISTRIBUTIONS, ("judge", "elsewhere"), "evret-ray")  # a folder under plugins/
    with pytest.raises(UnknownNameError) as err:
        create_judge("elsewhere")
    folder = REPO / "plugins" / "evret-ray"
    assert str(err.value).endswith(f"Install it with: pip install {folder} (its folder in this checkout)")


def _cli(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]), **env}
    return subprocess.run([sys.executable, "-m", "evret_core.cli", *args], capture_output=True, text=True,
                          env=environ, timeout=120)


def test_generate_without_a_key_is_one_line_and_no_warning(tmp_path: Path) -> None:  # newcomer problem 8
    pytest.importorskip("evret_openai", reason="the default provider is evret-openai's")
    done = _cli(["generate", "--corpus", str(REPO / "examples" / "corpus.jsonl"), "-n", "5",
                 "--output", str(tmp_path / "gen.jsonl")], OPENAI_API_KEY="", EVRET_CACHE_DIR=str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "evret: error: openai provider: no API key; pass api_key=... or set OPENAI_API_KEY"], done.stderr
    assert not (tmp_path / "gen.jsonl").exists()
    assert "default openai" in " ".join(_cli(["generate", "--help"]).stdout.split())


def test_rag_without_a_corpus_points_to_the_corpus_option(capsys: pytest.CaptureFixture[str]) -> None:  # problem 11
    pytest.importorskip("evret_bm25")
    assert main(["rag", "--dataset", QUESTIONS, "--retriever", "bm25", "--generator", "extractive"]) == 2
    assert one_error(capsys).startswith("evret: error: --retriever bm25 has no corpus to index: give --corpus "
                                         "CORPUS.jsonl")


@pytest.mark.parametrize("ray_says", [  # the two wordings of ray._private.services (Ray 2.x)
    "Could not find any running Ray instance. Please specify the one to connect to by setting `--address` flag or "
    "`RAY_ADDRESS` environment variable.",
    "Found multiple active Ray instances: {'a', 'b'}. Please specify the one to connect to by setting the "
    "`--address` flag or `RAY_ADDRESS` environment variable.",
])
def test_rays_address_advice_names_evrets_option(ray_says: str) -> None:  # newcomer problem 18
    executor = pytest.importorskip("evret_ray.executor")
    told = executor.in_evret_terms(ray_says)
    assert "--executor-option address=" in told and "`--address` flag" not in told
    assert told.startswith(ray_says.split(" Please")[0])


def test_the_harness_refuses_a_negative_seed_up_front() -> None:
    from evret_core.contracts.errors import EvretError
    from evret_core.rag import RagEvaluator

    with pytest.raises(EvretError, match="seed must be an integer from 0 to 9223372036854775807, got -1"):
        RagEvaluator(generator="extractive", conditions=["gold"], seed=-1)


def test_two_outputs_through_a_link_are_the_same_file(tmp_path: Path) -> None:
    from evret_core.contracts.errors import EvretError
    from evret_core.io.outputs import check_outputs

    (tmp_path / "out.json").write_text("{}")
    (tmp_path / "link.json").symlink_to(tmp_path / "out.json")
    with pytest.raises(EvretError, match="--write-cases .*link.json: --output writes to the same file"):
        check_outputs({"--output": tmp_path / "out.json", "--write-cases": tmp_path / "link.json"})
    check_outputs({"--output": tmp_path / "out.json", "--write-cases": None}, inputs=[None, tmp_path / "in.jsonl"])


def test_option_values_that_are_no_paths_do_not_trip_the_guard(tmp_path: Path) -> None:
    from evret_core.io.outputs import check_outputs, files_named

    (tmp_path / "corpus.jsonl").write_text("{}\n")
    options = {"prompt_template": "x" * 5000, "stop": "a\x00b", "corpus": str(tmp_path / "corpus.jsonl"),
               "nested": [{"path": str(tmp_path / "corpus.jsonl")}], "k": 5}
    assert files_named([options]) == [str(tmp_path / "corpus.jsonl")] * 2
    check_outputs({"--output": tmp_path / "out.json"}, options=[options])


def test_evaluate_takes_an_option_value_that_is_no_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    long_value = "a" * 5000  # once a traceback: File name too long, from looking for it as an input file
    assert main(["evaluate", "--config", str(REPO / "examples" / "eval.toml"), "--judge", "token-overlap",
                 "--judge-option", f"colour={long_value}", "--output", str(tmp_path / "r.json")]) == 2
    assert "option 'colour'" in one_error(capsys)
