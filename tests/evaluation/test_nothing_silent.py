"""Nothing silent (issue 33): a retriever that returns nothing, or an LLM part whose calls all fail, is never a
quiet row of zeros. From Python the evaluator warns with the count; the CLI names the count and the cause on
stderr, still writes the results, and exits 2 unless the user opted in (``--allow-empty-retrieval``,
``--allow-unmeasured``)."""

from __future__ import annotations

import json
import socket
import warnings
from pathlib import Path
from typing import Any

import pytest

from evret_core import EvaluationDataset, Evaluator, QueryExample
from evret_core.cli import main
from evret_core.evaluation.evaluator import EmptyRetrievalWarning
from evret_core.testing.llm_provider import register_stub_provider
from evret_core.testing.llm_stubs import FailFirst, StubLLMServer, always, isolate_llm_env

from .._helpers import FakePlugin
from .._paths import REPO

DATASET = REPO / "examples" / "dataset.jsonl"
CORPUS = REPO / "examples" / "corpus.jsonl"

RETRIEVERS = """
from evret_core import RetrievalResult, Retriever, hookimpl


class Nothing(Retriever):
    name = "nothing"

    def retrieve(self, query, k):
        return []


class Half(Retriever):
    \"\"\"Nothing for queries with an even number of words, one document otherwise.\"\"\"

    name = "half"

    def retrieve(self, query, k):
        if len(query.split()) % 2 == 0:
            return []
        return [RetrievalResult(doc_id="d1", score=1.0, metadata={"text": "bees make honey"})]


@hookimpl
def register_retrievers(register):
    register("nothing", Nothing)
    register("half", Half)
"""


def dataset(n: int = 4) -> EvaluationDataset:
    return EvaluationDataset(queries=[QueryExample(query_id=f"q{i}", query_text=" ".join(["bee"] * (i + 1)),
                                                   relevant_doc_ids=["d1"]) for i in range(n)])


# -- from Python ---------------------------------------------------------------------------------------------------
def test_a_retriever_that_returns_nothing_warns_with_the_count() -> None:
    with pytest.warns(EmptyRetrievalWarning, match=r"every query \(4 of 4\) retrieved nothing") as caught:
        results = Evaluator(lambda q, k: [], metrics=["recall@5"]).evaluate(dataset())
    assert len(caught) == 1 and caught[0].message.count == 4 and caught[0].message.total == 4  # type: ignore[union-attr]
    assert results.scores == {"recall@5": 0.0}
    assert results.stats["empty_retrieval"] == {"count": 4, "of": 4, "queries": ["q0", "q1", "q2", "q3"]}


def test_some_empty_queries_are_counted_without_a_warning() -> None:
    def half(query: str, k: int) -> list[dict[str, Any]]:
        return [] if len(query.split()) % 2 == 0 else [{"doc_id": "d1", "score": 1.0}]

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        results = Evaluator(half, metrics=["recall@5"]).evaluate(dataset())
    assert results.stats["empty_retrieval"] == {"count": 2, "of": 4, "queries": ["q1", "q3"]}
    full = Evaluator(lambda q, k: [{"doc_id": "d1", "score": 1.0}], metrics=["recall@5"]).evaluate(dataset())
    assert "empty_retrieval" not in full.stats


# -- evret evaluate: empty retrieval ----------------------------------------------------------------------------------
@pytest.fixture
def empty_retrievers(fake_plugin: FakePlugin, tmp_path: Path) -> Path:
    fake_plugin("evret-empty-retrievers", RETRIEVERS)
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"query_id": q.query_id, "query": q.query_text,
                                        "relevant_doc_ids": ["d1"]}) + "\n" for q in dataset().queries))
    return data


def test_the_cli_fails_a_run_in_which_no_query_retrieved_anything(
    empty_retrievers: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.json"
    argv = ["evaluate", "--dataset", str(empty_retrievers), "--retriever", "nothing", "--metric", "recall@5",
            "--no-progress", "--output", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert ("evret: error: every query (4 of 4) retrieved nothing: the scores are zeros that say nothing about "
            "the retriever") in err
    assert "--allow-empty-retrieval" in err and "Warning" not in err  # no Python warning line besides it
    assert json.loads(out.read_text())["stats"]["empty_retrieval"]["count"] == 4  # the results are kept
    assert main([*argv, "--allow-empty-retrieval"]) == 0
    err = capsys.readouterr().err
    assert "WARNING: every query (4 of 4) retrieved nothing" in err and "evret: error" not in err


def test_the_cli_warns_with_the_count_when_some_queries_retrieved_nothing(
    empty_retrievers: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["evaluate", "--dataset", str(empty_retrievers), "--retriever", "half", "--metric", "recall@5",
                 "--no-progress"]) == 0
    assert "WARNING: 2 of 4 queries retrieved nothing (q1, q3)" in capsys.readouterr().err


# -- evret evaluate: an LLM judge whose every call fails ----------------------------------------------------------------
def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


JUDGE_RUN = ["evaluate", "--dataset", str(DATASET), "--retriever", "bm25", "--retriever-option",
             f"corpus={CORPUS}", "--metric", "recall@2", "--no-progress", "--judge", "llm", "--judge-option",
             "provider=stub", "--judge-option", "api_key=sk-secret-77", "--judge-option", "retries=0"]


@pytest.fixture
def stub_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pytest.importorskip("evret_bm25", reason="the runs use evret-bm25")
    isolate_llm_env(monkeypatch, tmp_path, "EVRET_STUB_API_KEY")
    register_stub_provider()


def test_an_llm_judge_whose_every_call_failed_names_the_cause_and_fails(
    stub_env: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.json"
    base_url = f"http://127.0.0.1:{closed_port()}/v1"
    argv = [*JUDGE_RUN, "--judge-option", f"base_url={base_url}", "--output", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    stats = json.loads(out.read_text())["stats"]
    n = stats["judgments"]["unique"]
    assert n > 0 and stats["judgments"]["unmeasured"] == n
    error = [line for line in err.splitlines() if line.startswith("evret: error:")]
    assert len(error) == 1, err
    assert f"every judgment ({n} of {n}) could not be made" in error[0]
    assert f"llm judge: {n} call(s) failed: connection {n}" in error[0]
    assert f"connection failed to {base_url}" in error[0] and "ConnectionRefusedError" in error[0]
    assert "--allow-unmeasured" in error[0] and "sk-secret-77" not in err
    assert stats["judge"]["error_examples"]["connection"].startswith("stub: connection failed to")
    assert main([*argv, "--allow-unmeasured"]) == 0
    err = capsys.readouterr().err
    assert f"WARNING: every judgment ({n} of {n}) could not be made" in err and "evret: error" not in err


def test_some_failed_llm_calls_are_a_warning_naming_the_cause(
    stub_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    def bad(request: Any) -> bool:  # about a third of the judgments, the same ones on every run
        return int(request.fingerprint, 16) % 3 == 0

    with StubLLMServer(FailFirst(always("YES"), times=99, status=400, select=bad)) as server:
        code = main([*JUDGE_RUN, "--judge-option", f"base_url={server.openai_base_url}"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "judgment(s) unmeasured" in out + err
    assert "WARNING: llm judge: " in err and "call(s) failed: HTTP 400" in err and "stub: HTTP 400" in err


def test_allow_unmeasured_and_fail_on_unmeasured_exclude_each_other(
    stub_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*JUDGE_RUN, "--judge-option", "base_url=http://127.0.0.1:9/v1", "--allow-unmeasured",
                 "--fail-on-unmeasured"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["evret: error: --allow-unmeasured and --fail-on-unmeasured contradict each other: give one"]


def test_the_openai_provider_names_the_refused_connection_and_the_url(
    stub_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """The newcomer's case (item 7): the openai SDK's 'Connection error.' wraps the reason several exceptions
    deep, beside an unrelated one it was handling; the line names the URL and the refused connection."""
    pytest.importorskip("evret_openai", reason="the newcomer's case uses the openai provider")
    base_url = f"http://127.0.0.1:{closed_port()}/v1"
    argv = [*JUDGE_RUN, "--judge-option", "provider=openai", "--judge-option", f"base_url={base_url}",
            "--judge-option", "retries=1", "--judge-option", "max_concurrency=4"]
    assert main(argv) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "call(s) failed: connection" in error and f"openai: connection failed to {base_url}: Connection " \
        f"error. (ConnectionRefusedError: " in error, error
    assert "sk-secret-77" not in error


# -- evret rag ---------------------------------------------------------------------------------------------------------
RAG = REPO / "examples" / "rag"


def rag_argv(tmp_path: Path, *extra: str) -> list[str]:
    questions = tmp_path / "q3.jsonl"
    questions.write_text("".join(line + "\n" for line in (RAG / "questions.jsonl").read_text().splitlines()[:3]))
    return ["rag", "--dataset", str(questions), "--corpus", str(RAG / "corpus.jsonl"), "--resamples", "20",
            "--no-progress", "--output", str(tmp_path / "rag.json"), *extra]


def test_a_rag_generator_whose_every_call_failed_names_the_cause_and_fails(
    stub_env: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base_url = f"http://127.0.0.1:{closed_port()}/v1"
    argv = rag_argv(tmp_path, "--conditions", "gold", "--generator", "llm", "--generator-option", "provider=stub",
                    "--generator-option", f"base_url={base_url}", "--generator-option", "api_key=sk-x",
                    "--generator-option", "retries=0")
    assert main(argv) == 2
    err = capsys.readouterr().err
    error = [line for line in err.splitlines() if line.startswith("evret: error:")]
    assert len(error) == 1, err
    assert "generator: every call (3 of 3) failed: connection 3" in error[0]
    assert f"connection failed to {base_url}" in error[0] and "--allow-unmeasured" in error[0]
    stats = json.loads((tmp_path / "rag.json").read_text())["stats"]["llm"]["generator"]
    assert stats["errors"] == {"connection": 3} and "connection failed to" in stats["error_examples"]["connection"]
    assert main([*argv, "--allow-unmeasured"]) == 0
    assert "WARNING: generator: every call (3 of 3) failed" in capsys.readouterr().err


def test_a_rag_retriever_that_returns_nothing_fails_the_run(
    fake_plugin: FakePlugin, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_plugin("evret-empty-retrievers", RETRIEVERS)
    argv = rag_argv(tmp_path, "--generator", "extractive", "--retriever", "nothing")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "evret: error: every question (3 of 3) retrieved nothing" in err and "Warning" not in err
    assert (tmp_path / "rag.json").is_file()
    assert main([*argv, "--allow-empty-retrieval"]) == 0


def test_rag_warns_about_questions_with_gold_that_retrieved_nothing(
    fake_plugin: FakePlugin, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_plugin("evret-empty-retrievers", RETRIEVERS)
    assert main(rag_argv(tmp_path, "--generator", "extractive", "--retriever", "half")) == 0
    assert "WARNING: 1 of 3 questions with gold retrieved nothing (r03)" in capsys.readouterr().err


def test_a_columnar_run_counts_its_missing_queries_apart_and_warns_when_it_has_none(tmp_path: Path) -> None:
    """A TREC run read as columns: queries it lacks are 'missing' (scored 0 with missing_queries='zero'), not
    'empty'; a run that lacks every query of the dataset retrieved nothing for any of them, and says so."""
    from evret_core.io.runcolumns import read_run_columns

    run = tmp_path / "run.trec"
    run.write_text("q0 Q0 d1 1 2.0 tag\nq2 Q0 d1 1 2.0 tag\n")
    results = Evaluator(read_run_columns(run), metrics=["recall@5"], missing_queries="zero").evaluate(dataset())
    assert results.stats["missing_queries"]["queries"] == ["q1", "q3"] and "empty_retrieval" not in results.stats
    other = tmp_path / "other.trec"
    other.write_text("x9 Q0 d1 1 2.0 tag\n")
    with pytest.warns(EmptyRetrievalWarning, match=r"\(4 of 4\)"):
        Evaluator(read_run_columns(other), metrics=["recall@5"], missing_queries="zero",
                  ).evaluate(dataset())


def test_a_run_file_holding_none_of_the_queries_fails_too(empty_retrievers: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run.trec"
    run.write_text("other Q0 d1 1 2.0 tag\n")
    argv = ["evaluate", "--dataset", str(empty_retrievers), "--run", str(run), "--missing-queries", "zero",
            "--metric", "recall@5", "--no-progress"]
    assert main(argv) == 2
    assert "evret: error: every query (4 of 4) retrieved nothing" in capsys.readouterr().err
