"""`evret judge`: a judged pool of runs, graded by a judge that needs no expected answer, written as TREC qrels."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from evret_core import hookimpl
from evret_core.cli import main
from evret_core.contracts.judge import Judge, JudgmentContext
from evret_core.contracts.provider import ChatMessage, LLMProvider, LLMResponse
from evret_core.io.trec import read_qrels, write_run
from evret_core.judge.llm import LLMJudge
from evret_core.plugins.loading import register_plugin
from tests._helpers import one_error

# d<n> has 5 + 7n words: LengthGrade grades 0, 1, 1, 2, 3, 3...; "skip" holds SKIP: unmeasured
TEXTS = {f"d{n}": " ".join(["word"] * (5 + 7 * n)) for n in range(6)}
TEXTS["skip"] = "SKIP " + " ".join(["word"] * 30)
RUN_A = {"q2": {"d0": 3.0, "d4": 2.0, "skip": 1.0}, "q10": {"d1": 2.0, "d3": 1.0}}
RUN_B = {"q2": {"d5": 2.0, "d0": 1.0}, "q10": {"d3": 5.0, "d2": 4.0, "d0": 3.0}, "q77": {"d1": 1.0}}


class LengthGrade(Judge):
    """Grade = words // 10 capped at 3, on the passage alone; SKIP: unmeasured. Records what it is asked."""

    name = "length-grade"
    reference_free = True
    grades = 3
    cut = 2
    asked: list[JudgmentContext] = []

    def judge(self, context: JudgmentContext) -> bool:
        grade = self.batch_grade([context])[0]
        return grade is not None and grade >= 2

    def batch_grade(self, contexts: Sequence[JudgmentContext]) -> list[float | None]:
        LengthGrade.asked.extend(contexts)
        return [None if "SKIP" in c.retrieved_text else float(min(3, len(c.retrieved_text.split()) // 10))
                for c in contexts]


class Answers(LLMProvider):
    """An in-process provider: YES for a passage of 30 words or more; counts its calls."""

    name = "answers"
    calls = 0

    async def acomplete(self, messages: Sequence[ChatMessage], **keywords: Any) -> LLMResponse:
        Answers.calls += 1
        await asyncio.sleep(0)
        return LLMResponse("YES" if messages[-1].content.count("word") >= 30 else "NO", 1, 1)


class QueryOnlyLLM(LLMJudge):
    """The llm judge asked with no expected answer: a yes/no reference-free judge with the llm judge's cache."""

    name = "query-llm"
    reference_free = True


class Plugin:
    @hookimpl
    def register_judges(self, register: Any) -> None:
        register("length-grade", LengthGrade)
        register("query-llm", lambda cache: QueryOnlyLLM(provider=Answers("m"), cache=cache))


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    register_plugin(Plugin(), name="judges")
    LengthGrade.asked = []
    Answers.calls = 0
    monkeypatch.chdir(tmp_path)
    (tmp_path / "topics.tsv").write_text("q2\tbees in winter\nq10\tvarroa mites\nq5\tno run has me\n",
                                         encoding="utf-8")
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, "text": t}) + "\n" for d, t in TEXTS.items()),
                                           encoding="utf-8")
    write_run(tmp_path / "a.run", RUN_A)
    write_run(tmp_path / "b.run", RUN_B)
    return tmp_path


BASE = ["judge", "--queries", "topics.tsv", "--corpus", "corpus.jsonl", "--run", "a.run", "--run", "b.run",
        "--judge", "length-grade", "--no-progress"]


def test_the_pool_is_graded_and_written_as_qrels(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*BASE, "--depth", "2", "-o", "judged.qrels"]) == 0
    # depth 2 pool, by qid then pool order: q10: d1, d3 (rank 1), d2 (rank 2); q2: d0, d5 (rank 1), d4 (rank 2)
    assert (files / "judged.qrels").read_text(encoding="utf-8") == (
        "q10 0 d1 1\nq10 0 d3 2\nq10 0 d2 1\nq2 0 d0 0\nq2 0 d5 3\nq2 0 d4 3\n")
    assert read_qrels(files / "judged.qrels") == {"q10": {"d1": 1.0, "d3": 2.0, "d2": 1.0},
                                                  "q2": {"d0": 0.0, "d5": 3.0, "d4": 3.0}}
    # judged best rank first: every rank-1 pair before any rank-2 one; the query is the text, never an answer
    asked = [(c.query, c.retrieved_text.count("word")) for c in LengthGrade.asked]
    assert asked == [("bees in winter", 5), ("varroa mites", 12), ("bees in winter", 40), ("varroa mites", 26),
                     ("bees in winter", 33), ("varroa mites", 19)]
    assert {c.expected_text for c in LengthGrade.asked} == {""}
    out = capsys.readouterr().out
    assert "judged by 'length-grade': 6 (query, passage) pairs from 2 run(s) at depth 2 over 3 queries" in out
    assert "grades 0-3: 0: 1, 1: 2, 2: 1, 3: 2; 0 unmeasured (left out of the qrels)" in out
    assert "1 run queries are not among --queries: ignored" in out


def test_unmeasured_pairs_are_left_out_and_counted(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*BASE, "--depth", "3", "-o", "judged.qrels", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert "skip" not in read_qrels(files / "judged.qrels")["q2"]
    assert summary["pairs"] == 8 and summary["unmeasured"] == 1 and summary["judged"] == 7
    assert summary["pools"] == {"q2": 4, "q10": 4, "q5": 0}
    assert summary["histogram"] == {"0": 2, "1": 2, "2": 1, "3": 2}
    assert sum(summary["histogram"].values()) == summary["judged"]


def test_skip_judged_tops_up_an_existing_pool(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (files / "human.qrels").write_text("q2 0 d0 1\nq10 0 d3 3\nq10 0 d9 0\n", encoding="utf-8")
    assert main([*BASE, "--depth", "2", "--skip-judged", "human.qrels", "-o", "more.qrels", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["skipped"] == 2 and summary["pairs"] == 4
    assert read_qrels(files / "more.qrels") == {"q10": {"d1": 1.0, "d2": 1.0}, "q2": {"d5": 3.0, "d4": 3.0}}
    assert len(LengthGrade.asked) == 4


def test_dry_run_plans_without_judging_or_writing(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*BASE, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "pool: 8 (query, passage) pairs over 3 queries, depth 10" in out
    assert "8 judgment(s) planned, 8 distinct, 0 cached, 0 would be sent" in out
    assert LengthGrade.asked == [] and not list(files.glob("*.qrels"))
    assert main([*BASE, "--dry-run", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["pairs"] == 8


def test_a_rerun_sends_nothing_from_the_judge_cache(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [*BASE[:-3], "--judge", "query-llm", "--judge-option", "cache=judge-cache", "--no-progress"]
    assert main([*argv, "-o", "one.qrels"]) == 0
    assert Answers.calls == 8
    assert main([*argv, "-o", "two.qrels", "--json"]) == 0
    assert Answers.calls == 8  # every answer came from the cache
    assert (files / "one.qrels").read_bytes() == (files / "two.qrels").read_bytes()
    summary = json.loads(capsys.readouterr().out.split("qrels written to one.qrels\n")[1])
    assert summary["cost"]["answers"]["cache_hits"] == 8 and summary["cost"]["answers"]["calls"] == 0


def test_a_results_file_is_a_run(files: Path) -> None:
    results = {"q2": [{"doc_id": "d4", "text": TEXTS["d4"]}], "q10": [{"doc_id": "d2", "text": TEXTS["d2"]}]}
    (files / "retrieved.jsonl").write_text("".join(json.dumps({"query_id": q, "results": r}) + "\n"
                                                   for q, r in results.items()), encoding="utf-8")
    (files / "ds.jsonl").write_text(json.dumps({"query_id": "q2", "query": "bees in winter"}) + "\n"
                                    + json.dumps({"query_id": "q10", "query": "varroa mites"}) + "\n",
                                    encoding="utf-8")
    assert main(["evaluate", "--dataset", "ds.jsonl", "--run", "retrieved.jsonl", "--judge", "length-grade",
                 "--metric", "ndcg@1", "--output", "res.json", "--no-progress"]) == 0
    assert main(["judge", "--queries", "ds.jsonl", "--corpus", "corpus.jsonl", "--run", "res.json", "--judge",
                 "length-grade", "-o", "j.qrels", "--no-progress"]) == 0
    assert read_qrels(files / "j.qrels") == {"q10": {"d2": 1.0}, "q2": {"d4": 3.0}}


@pytest.mark.parametrize(("extra", "message"), [
    (["--judge", "contains", "-o", "x.qrels"], "judge 'contains' needs expected answers; evret judge grades "
                                               "(query, passage) pairs alone: give a reference-free judge"),
    ([], "--output QRELS is needed (or --dry-run to plan without judging)"),
    (["--depth", "0", "-o", "x.qrels"], "--depth must be an integer from 1"),
    (["-o", "-", "--json"], "--output - and --json would both write to standard output"),
    (["--executor", "nosuch", "-o", "x.qrels"], "unknown executor 'nosuch'; known executors: local"),
    (["--executor-option", "workers", "-o", "x.qrels"], "--executor-option 'workers': write it as KEY=VALUE"),
])
def test_bad_input_is_one_line_before_any_judging(files: Path, capsys: pytest.CaptureFixture[str],
                                                  extra: list[str], message: str) -> None:
    assert main([*BASE, *extra]) == 2
    assert message in one_error(capsys)
    assert LengthGrade.asked == [] and not (files / "x.qrels").exists()


def test_a_pooled_document_missing_from_the_corpus_is_named(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_run(files / "c.run", {"q2": {"ghost": 1.0}})
    assert main([*BASE, "--run", "c.run", "-o", "x.qrels"]) == 2
    assert "pooled document(s) are not in the corpus: ghost" in one_error(capsys)
    assert LengthGrade.asked == []


def test_a_bad_topics_line_is_named(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (files / "topics.tsv").write_text("q2\tbees\nq10 varroa\n", encoding="utf-8")
    assert main([*BASE, "-o", "x.qrels"]) == 2
    assert "topics.tsv:2: expected query_id<TAB>text" in one_error(capsys)


def test_an_id_qrels_cannot_hold_is_refused_before_judging(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (files / "ds.jsonl").write_text(json.dumps({"query_id": "q 2", "query": "bees in winter"}) + "\n",
                                    encoding="utf-8")
    write_run(files / "c.run", {"q2": {"d1": 1.0}})
    results = {"q 2": [{"doc_id": "d1", "text": TEXTS["d1"]}]}
    (files / "retrieved.jsonl").write_text(json.dumps({"query_id": "q 2", "results": results["q 2"]}) + "\n",
                                           encoding="utf-8")
    assert main(["evaluate", "--dataset", "ds.jsonl", "--run", "retrieved.jsonl", "--judge", "length-grade",
                 "--metric", "ndcg@1", "--output", "res.json", "--no-progress"]) == 0
    LengthGrade.asked = []
    capsys.readouterr()
    assert main(["judge", "--queries", "ds.jsonl", "--corpus", "corpus.jsonl", "--run", "res.json", "--judge",
                 "length-grade", "-o", "x.qrels", "--no-progress"]) == 2
    assert "query 'q 2', document 'd1': a TREC qrels id cannot hold whitespace" in one_error(capsys)
    assert LengthGrade.asked == [] and not (files / "x.qrels").exists()
