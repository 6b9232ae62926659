"""Hostile and faulty input (issue 13): each case ends with one line on stderr naming the file, line or option,
exit status 2, and nothing written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evret_core.cli import main
from evret_core.contracts.errors import EvretError
from evret_core.evaluation.config import EvaluateConfig
from evret_core.io.datasets import EvaluationDataset
from evret_core.io.queries import QueryExample

from .._helpers import one_error
from .._paths import REPO
from .test_cli import BASE, env  # noqa: F401  (the fixture)

# -- item 2: options belong to the judge they were written for -------------------------------------------------
JUDGE_TOML = ('dataset = "data.jsonl"\nmetrics = ["recall@2"]\n[retriever]\nname = "tiny"\n'
              '[judge]\nname = "token-overlap"\nmin_tokens = 1\noverlap_ratio = 0.5\n')


def test_another_judge_on_the_command_line_drops_the_files_judge_options(
    env: Path, capsys: pytest.CaptureFixture[str]  # noqa: F811
) -> None:
    (env / "eval.toml").write_text(JUDGE_TOML)
    assert main(["evaluate", "--config", "eval.toml", "--judge", "exact", "--output", "r.json"]) == 0
    config = json.loads((env / "r.json").read_text())["config"]
    assert config["judge"]["name"] == "exact" and "min_tokens" not in json.dumps(config["judge"])


def test_the_same_judge_keeps_the_files_options_and_flags_add_to_them(
    env: Path, capsys: pytest.CaptureFixture[str]  # noqa: F811
) -> None:
    (env / "eval.toml").write_text(JUDGE_TOML)
    assert main(["evaluate", "--config", "eval.toml", "--judge", "token-overlap", "--judge-option",
                 "overlap_ratio=0.4", "--output", "r.json"]) == 0
    judge = json.loads((env / "r.json").read_text())["config"]["judge"]
    assert judge["min_tokens"] == 1 and judge["overlap_ratio"] == 0.4


def test_an_option_that_does_not_fit_names_its_source(env: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    (env / "eval.toml").write_text(JUDGE_TOML.replace("min_tokens = 1", "colour = 'red'"))
    assert main(["evaluate", "--config", "eval.toml", "--output", "r.json"]) == 2
    assert "option 'colour' (from eval.toml [judge]) is not an option" in one_error(capsys)
    assert main(["evaluate", "--config", "eval.toml", "--judge", "exact", "--judge-option", "shade=1",
                 "--output", "r.json"]) == 2
    assert "judge 'exact': option 'shade' (from --judge-option)" in one_error(capsys)
    assert not (env / "r.json").exists()


def test_example_config_with_the_llm_judge_is_not_handed_min_tokens(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("evret_bm25", reason="the example uses evret-bm25")
    argv = ["evaluate", "--config", str(REPO / "examples" / "eval.toml"), "--judge", "llm", "--judge-option",
            "provider=nope", "--dry-run", "--no-progress"]
    main(argv)
    err = capsys.readouterr().err
    assert "min_tokens" not in err and "overlap_ratio" not in err


@pytest.mark.parametrize(("toml", "message"), [
    ("k = 0\n", "eval.toml: option 'k': must be an integer from 1 to 100000, got 0"),
    ("seed = -1\n", "eval.toml: option 'seed': must be an integer from 0 to"),
    ("n_resamples = 1000000000\n", "eval.toml: option 'n_resamples': must be an integer from 1 to 1000000,"),
    ("confidence_level = nan\n", "eval.toml: option 'confidence_level': must be a number between 0 and 1"),
    ("fail_on_unmeasured = 'yes'\n", "eval.toml: option 'fail_on_unmeasured': must be true or false"),
    ("matching = 'best'\n", "eval.toml: option 'matching': Input should be 'first_match' or 'any_match'"),
    ("metrics = ['recall@99999999999999999999']\n", "eval.toml: option 'metrics': bad metric name"),
    ("judge = 5\n", "eval.toml: option 'judge"),
    ("[judge]\nname = 'token-overlap'\noverlap_ratio = nan\n", "option 'overlap_ratio' is nan; give a finite"),
    ("colour = 1\n", "eval.toml: option 'colour': unknown setting"),
])
def test_config_file_errors_name_the_file_and_option(
    env: Path, capsys: pytest.CaptureFixture[str], toml: str, message: str  # noqa: F811
) -> None:
    (env / "eval.toml").write_text(toml)
    metric = [] if toml.startswith("metrics") else ["--metric", "mrr"]
    argv = ["evaluate", "--dataset", "data.jsonl", "--retriever", "tiny", *metric, "--config", "eval.toml"]
    assert main([*argv, "--output", "r.json"]) == 2
    assert message in one_error(capsys)
    assert not (env / "r.json").exists()


def test_toml_encodings(env: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    (env / "latin.toml").write_bytes(b'# caf\xe9\nk = 2\n')
    assert main([*BASE, "--config", "latin.toml"]) == 2
    assert "latin.toml:1:6: not UTF-8 text (byte 0xe9)" in one_error(capsys)
    (env / "bom.toml").write_bytes(b"\xef\xbb\xbfk = 2\n")
    assert main([*BASE, "--config", "bom.toml", "--output", "r.json"]) == 0
    assert json.loads((env / "r.json").read_text())["config"]["k"] == 2


def test_evaluate_config_in_python(env: Path) -> None:  # noqa: F811
    config = EvaluateConfig(dataset="data.jsonl", retriever="tiny", metrics=["recall@2"],
                            judge={"name": "token-overlap", "min_tokens": 1}, output="py.json")
    assert config.judge is not None and config.judge.options == {"min_tokens": 1}
    results = config.evaluate()
    assert results.scores["recall@2"] == 1.0 and (env / "py.json").is_file()
    (env / "eval.toml").write_text(JUDGE_TOML)
    assert EvaluateConfig.from_toml("eval.toml").judge.options == {"min_tokens": 1, "overlap_ratio": 0.5}  # type: ignore[union-attr]
    with pytest.raises(EvretError, match="EvaluateConfig: option 'seed': must be an integer from 0"):
        EvaluateConfig.validated({"dataset": "d", "retriever": "tiny", "metrics": ["mrr"], "seed": -1})


# -- item 11: every number a user can type ----------------------------------------------------------------------
@pytest.mark.parametrize(("extra", "message"), [
    (["--metric", "recall@99999999999999999999"], "bad metric name 'recall@99999999999999999999'"),
    (["--resamples", "1000000000"], "--resamples: must be an integer from 1 to 1000000, got 1000000000"),
    (["--seed", "-1"], "--seed: must be an integer from 0 to"),
    (["-k", "0"], "-k: must be an integer from 1 to 100000, got 0"),
    (["-k", "99999999999"], "-k: must be an integer from 1 to 100000"),
    (["--confidence-level", "nan"], "--confidence-level: must be a number between 0 and 1"),
    (["--confidence-level", "1"], "--confidence-level: must be a number between 0 and 1"),
    (["--min-slice-size", "-3"], "--min-slice-size: must be an integer from 0 to"),
    (["--judge-option", "overlap_ratio=NaN"], "--judge-option 'overlap_ratio=NaN': nan is not a finite number"),
    (["--retriever-option", "k1=-Infinity"], "--retriever-option 'k1=-Infinity': -inf is not a finite number"),
])
def test_evaluate_numbers_are_bounded(
    env: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str  # noqa: F811
) -> None:
    assert main([*BASE, *extra, "--output", "r.json"]) == 2
    assert message in one_error(capsys)
    assert not (env / "r.json").exists()


def test_compare_report_and_trec_numbers_are_bounded(
    env: Path, capsys: pytest.CaptureFixture[str]  # noqa: F811
) -> None:
    assert main([*BASE, "--output", "a.json"]) == 0
    assert main([*BASE, "--output", "b.json", "--metric", "hit_rate@1"]) == 0
    capsys.readouterr()
    for argv, message in [
        (["compare", "a.json", "b.json", "--seed", "-1"], "--seed must be an integer from 0"),
        (["compare", "a.json", "b.json", "--n-resamples", "1000000000"], "--n-resamples must be an integer"),
        (["compare", "a.json", "b.json", "--alpha", "nan"], "--alpha must be between 0 and 1"),
        (["report", "a.json", "--max-k", "99999999999"], "--max-k must be an integer from 1 to 100000"),
        (["report", "a.json", "--alpha", "2"], "--alpha must be between 0 and 1"),
        (["trec", "q", "r", "-l", "nan"], "--relevance-level must be between"),
        (["trec", "q", "r", "-m", "ndcg@99999999999999999999"], "bad metric name"),
    ]:
        assert main(argv) == 2, argv
        assert message in one_error(capsys)


# -- items 4, 5, 10: what a dataset may hold -------------------------------------------------------------------
@pytest.mark.parametrize(("content", "message"), [
    (b'{"query": "a", "relevant_doc_ids": {"d1": NaN}}\n', "d.jsonl:1: relevant_doc_ids: grade of 'd1' is nan"),
    (b'{"query": "a", "expected_answers": ["x"]}\n{"query": "b", "relevant_doc_ids": {"d1": Infinity}}\n',
     "d.jsonl:2: relevant_doc_ids: grade of 'd1' is inf"),
    (b'{"query_id": "", "query": "a", "expected_answers": ["x"]}\n', "d.jsonl:1: query_id: query_id is empty"),
    (b'{"query_id": "  ", "query": "a", "expected_answers": ["x"]}\n', "d.jsonl:1: query_id: query_id is empty"),
    (b'{"query_id": true, "query": "a", "expected_answers": ["x"]}\n', "d.jsonl:1: field 'query_id' must be"),
    (b'{"query": "a", "expected_answers": ["x"]}\n{"query": "b\\ud800", "expected_answers": ["x"]}\n',
     "d.jsonl:2: a string holds a lone surrogate"),
    (b'{"query": "a", "expected_answers": ["x"]}\n{"query": "caf\xe9", "expected_answers": ["x"]}\n',
     "d.jsonl:2:15: not UTF-8 text (byte 0xe9)"),
    (b'{"query": "a", "expected_answers": ' + b"[" * 100_000 + b"\n", "d.jsonl:1: JSON nested too deeply"),
])
def test_bad_dataset_lines(tmp_path: Path, content: bytes, message: str) -> None:
    (tmp_path / "d.jsonl").write_bytes(content)
    with pytest.raises(EvretError) as info:
        EvaluationDataset.load(tmp_path / "d.jsonl")
    assert message in str(info.value)


def test_deep_json_file_names_the_line(tmp_path: Path) -> None:
    (tmp_path / "d.json").write_text('[\n{"query": "a",\n "expected_answers": ' + "[" * 100_000)
    with pytest.raises(EvretError, match=r"d.json:3: JSON nested too deeply"):
        EvaluationDataset.load(tmp_path / "d.json")


def test_lone_surrogate_fails_at_load_in_the_cli(env: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    (env / "s.jsonl").write_text('{"query": "queen \\udc00", "expected_answers": ["x"]}\n')
    assert main([*BASE, "--dataset", "s.jsonl", "--output", "r.json"]) == 2
    assert "s.jsonl:1: a string holds a lone surrogate" in one_error(capsys)


def test_python_api_refuses_the_same(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="lone surrogate"):
        QueryExample(query_id="q", query_text="a\ud800", expected_answers=["x"])
    with pytest.raises(ValueError, match="query_id is empty"):
        QueryExample(query_id=" ", query_text="a", expected_answers=["x"])
    with pytest.raises(ValueError, match="finite"):
        QueryExample(query_id="q", query_text="a", relevant_doc_ids={"d": float("nan")})


@pytest.mark.parametrize(("score", "message"), [("nan", "is not a finite number"), ("inf", "is not a finite number")])
def test_beir_qrels_grades_are_finite(tmp_path: Path, score: str, message: str) -> None:
    (tmp_path / "qrels").mkdir()
    (tmp_path / "corpus.jsonl").write_text('{"_id": "d1", "text": "x"}\n')
    (tmp_path / "queries.jsonl").write_text('{"_id": "q1", "text": "x"}\n')
    (tmp_path / "qrels" / "test.tsv").write_text(f"query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t{score}\n")
    with pytest.raises(EvretError, match=rf"test.tsv:3: score '{score}' {message}"):
        EvaluationDataset.from_beir(tmp_path)


# -- item 15: results files ------------------------------------------------------------------------------------
def test_results_schema_errors_are_one_line(env: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    (env / "r.json").write_text(json.dumps({"scores": {"mrr": 1.0}, "metrics": ["mrr"], "per_query": []}))
    assert main(["report", "r.json"]) == 2
    assert "r.json: not an Evret results file (per_query: Input should be a valid dictionary)" in one_error(capsys)
    (env / "deep.json").write_text('{"scores": {}, "per_query": ' + "[" * 100_000)
    assert main(["compare", "deep.json", "r.json"]) == 2
    assert "deep.json:1: JSON nested too deeply" in one_error(capsys)


# -- item 19: secrets --------------------------------------------------------------------------------------------
def test_credentials_in_urls_and_keys_never_reach_results_or_reports(
    env: Path, capsys: pytest.CaptureFixture[str]  # noqa: F811
) -> None:
    from evret_core.results.evaluation import EvaluationResults, add_statistics

    results = EvaluationResults.from_json(json.dumps({
        "scores": {"mrr": 1.0}, "metrics": ["mrr"],
        "per_query": {"q": {"query_id": "q", "query_text": "t", "scores": {"mrr": 1.0}, "retrieved_ids": []}},
        "config": {"judge": {"name": "llm", "base_url": "http://user:SECRET1@host/v1?api-key=SECRET2&model=m",
                             "api_key": "SECRET3", "max_tokens": 5}},
    }))
    add_statistics(results, n_resamples=10)
    results.to_json(env / "r.json")
    text = (env / "r.json").read_text()
    assert "SECRET" not in text
    data = json.loads(text)
    for judge in (data["config"]["judge"], data["manifest"]["judge"]):
        assert judge["base_url"] == "http://user:***@host/v1?api-key=***&model=m"
        assert judge["api_key"] == "***" and judge["max_tokens"] == 5
    # a results file written before redaction: the report redacts it
    raw = json.loads(text)
    raw["manifest"]["judge"]["base_url"] = "https://TOKEN9@host/v1?sig=SECRET4"
    (env / "old.json").write_text(json.dumps(raw))
    for fmt in ("html", "markdown", "latex"):
        assert main(["report", "old.json", "--format", fmt]) == 0
        out = capsys.readouterr().out
        assert "SECRET4" not in out and "TOKEN9" not in out


def test_error_messages_are_redacted(env: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    assert main([*BASE, "--dataset", "http://me:SECRET@host/data.jsonl?token=SECRET2"]) == 2
    line = one_error(capsys)
    assert "SECRET" not in line and "me:***@host/data.jsonl?token=***" in line


def test_redaction_rules() -> None:
    from evret_core.io.redact import is_secret_name, redact

    assert all(is_secret_name(n) for n in ("api_key", "X-Api-Key", "accessToken", "OPENAI_API_KEY", "secret",
                                           "password", "client_secret", "APIKey", "sig"))
    assert not any(is_secret_name(n) for n in ("max_tokens", "min_tokens", "model", "keyword", "tokenizer"))
    assert redact({"urls": ["ftp://a:b@h/x"], "token": None}) == {"urls": ["ftp://a:***@h/x"], "token": None}


# -- items 21, 22: imports and pipes -----------------------------------------------------------------------------
def _run(code_or_args: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, *code_or_args], capture_output=kwargs.pop("capture", True),  # type: ignore[arg-type]
                          text=True, env=environ, timeout=120, **kwargs)  # type: ignore[call-overload,no-any-return]


def test_the_testing_kit_without_pytest_says_so() -> None:
    """The kit's face imports its suites eagerly, so any of it needs pytest (the extra ``testing``): without it,
    one ImportError that names pytest and the extra."""
    code = ("import sys; sys.modules['pytest'] = None\n"
            "for module in ('evret_core.testing', 'evret_core.testing.llm_stubs'):\n"
            "    try:\n        __import__(module)\n    except ImportError as exc:\n        print(exc)\n")
    proc = _run(["-c", code])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ['evret_core.testing needs pytest: pip install pytest (the extra "testing")'] * 2
    pyproject = (REPO / "pyproject.toml").read_text()
    assert 'testing = ["pytest' in pyproject


@pytest.mark.parametrize("command", [["compare", "a.json", "b.json"], ["compare", "a.json", "b.json", "--json"],
                                     ["report", "a.json", "b.json"], ["plugins"], ["trec", "qrels", "run"]])
def test_a_closed_pipe_exits_quietly(tmp_path: Path, command: list[str]) -> None:
    for name, shift in (("a", 0.0), ("b", 0.1)):
        per_query = {f"q{i}": {"query_id": f"q{i}", "query_text": "t", "retrieved_ids": [],
                               "scores": {"mrr": (i % 3) / 3 + shift}} for i in range(50)}
        mean = sum(q["scores"]["mrr"] for q in per_query.values()) / len(per_query)
        (tmp_path / f"{name}.json").write_text(json.dumps({"scores": {"mrr": mean}, "metrics": ["mrr"],
                                                           "per_query": per_query}))
    (tmp_path / "qrels").write_text("".join(f"q{i} 0 d{i} 1\n" for i in range(50)))
    (tmp_path / "run").write_text("".join(f"q{i} Q0 d{i} 1 1.0 r\n" for i in range(50)))
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line, like `| head -0`
    try:
        proc = _run(["-m", "evret_core.cli", *command], cwd=tmp_path, stdout=write, stderr=subprocess.PIPE,
                    capture=False)
    finally:
        os.close(write)
    assert proc.stderr == "" and proc.returncode == 141


# -- item 20: what `make test` does to the machine is said, not done silently --------------------------------------
def test_test_setup_says_what_it_does_and_changes_nothing_without_root(tmp_path: Path) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "id").write_text('#!/bin/sh\n[ "$1" = "-un" ] && echo tester || echo 1000\n')
    (fake / "id").chmod(0o755)
    for tool in ("apt-get", "useradd"):  # would fail the test if called
        (fake / tool).write_text(f"#!/bin/sh\necho {tool} was called >&2\nexit 99\n")
        (fake / tool).chmod(0o755)
    proc = subprocess.run(["bash", str(REPO / ".ci" / "test-setup.sh")], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"})
    assert proc.returncode == 0 and "was called" not in proc.stderr, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines and all(line.startswith("test-setup: ") for line in lines)
    assert any("chromium" in line for line in lines) and any("runs as tester" in line for line in lines)


def test_readme_says_what_make_test_installs() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("### What `make test` installs and needs", 1)[1].split("\n## ", 1)[0]
    for needed in ("apt-get", "chromium", "system user `postgres`", "root", "skips"):
        assert needed in section


def test_trec_files_report_the_line_of_a_bad_byte(tmp_path: Path) -> None:
    from evret_core.io.trec import read_qrels

    lines = b"".join(b"q%d 0 d%d 1\n" % (i, i) for i in range(3000)) + b"q9 0 caf\xe9 1\n"
    (tmp_path / "qrels").write_bytes(lines)
    with pytest.raises(EvretError, match=r"qrels:3001: not UTF-8 text \(byte 0xe9 at column 9\)"):
        read_qrels(tmp_path / "qrels")
