"""The pytest plugin, run as a user runs it: a test file of theirs in a pytest subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from .._paths import REPO

USER_TESTS = '''
import asyncio, os, re
from pathlib import Path
from evret_core import RetrievalResult
from evret_core.pytest_plugin import assert_metric, assert_no_regression
from evret_core.contracts.retrieve import Retriever

DATASET = Path({dataset!r})
CORPUS = [__import__("json").loads(l) for l in Path({corpus!r}).read_text().splitlines() if l.strip()]
CALLS = []

def words(t):
    return set(re.findall(r"[a-z0-9]+", t.lower()))

class Overlap(Retriever):
    def __init__(self, damage=0):
        self.damage = damage
    async def aretrieve(self, query, k):  # async only: the evaluator must run it from sync code and in a loop
        CALLS.append(query)
        ranked = sorted(CORPUS, key=lambda d: (-len(words(query) & words(d["title"] + " " + d["text"])), d["id"]))
        ranked = ranked[self.damage:] + ranked[:self.damage]
        return [RetrievalResult(doc_id=d["id"], score=float(-i), metadata={{"text": d["text"]}})
                for i, d in enumerate(ranked[:k])]

GOOD, BAD = Overlap(), Overlap(damage=3)
METRICS = ["recall@5", "mrr@10"]

def test_floor_passes(evret_evaluate):
    assert_metric(evret_evaluate(DATASET, GOOD, METRICS, judge="token-overlap"), "recall@5", at_least=0.5)

def test_same_arguments_run_once(evret_evaluate):
    before = len(CALLS)
    evret_evaluate(DATASET, GOOD, METRICS, judge="token-overlap")
    assert len(CALLS) == before

def test_inside_a_running_loop(evret_evaluate):
    async def main():
        return evret_evaluate(DATASET, GOOD, METRICS, judge="token-overlap", seed=1)
    assert asyncio.run(main()).scores["recall@5"] > 0.5

def test_cache_dir_is_pytests(evret_cache_dir):
    assert os.environ["EVRET_CACHE_DIR"] == str(evret_cache_dir)
    assert evret_cache_dir.parts[-2:] == ("d", "evret")

def test_floor_fails(evret_evaluate):
    assert_metric(evret_evaluate(DATASET, BAD, METRICS, judge="token-overlap"), "mrr@10", at_least=0.99)

def test_regression_fails(evret_evaluate):
    good = evret_evaluate(DATASET, GOOD, METRICS, judge="token-overlap")
    assert_no_regression(evret_evaluate(DATASET, BAD, METRICS, judge="token-overlap"), good, metrics=["mrr@10"])
'''


def _run_user_tests(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    test_file = tmp_path / "test_user_quality.py"
    test_file.write_text(textwrap.dedent(USER_TESTS.format(dataset=str(REPO / "examples" / "dataset.jsonl"),
                                                           corpus=str(REPO / "examples" / "corpus.jsonl"))))
    env = {k: v for k, v in os.environ.items() if k not in ("EVRET_CACHE_DIR", "PYTEST_ADDOPTS")}
    # installed (make test): pytest finds the plugin through its pytest11 entry point, as on a user's machine;
    # a source checkout without the install loads it by module name
    installed = any(ep.value == "evret_core.pytest_plugin" for ep in entry_points(group="pytest11"))
    load = [] if installed else ["-p", "evret_core.pytest_plugin"]
    return subprocess.run(
        [sys.executable, "-m", "pytest", *load, "-q", "-rN", "--tb=short", "-W", "error", str(test_file)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )


@pytest.fixture(scope="module")
def user_run(tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess[str]:
    return _run_user_tests(tmp_path_factory.mktemp("user"))


def test_passing_and_failing_assertions_report_as_users_expect(user_run: subprocess.CompletedProcess[str]) -> None:
    out = user_run.stdout + user_run.stderr
    assert "2 failed, 4 passed" in out, out


def test_a_failed_floor_shows_the_score_interval_and_worst_queries(
        user_run: subprocess.CompletedProcess[str]) -> None:
    out = user_run.stdout
    line = next(ln for ln in out.splitlines() if "mrr@10 = " in ln and "is below 0.99" in ln)
    assert "[" in line and "over 22 queries" in line
    assert "worst queries: q" in out


def test_a_regression_shows_both_scores_and_the_drops(user_run: subprocess.CompletedProcess[str]) -> None:
    out = user_run.stdout
    assert "significantly below the baseline's" in out and "largest drops: q" in out


def test_the_plugin_is_declared_as_a_pytest11_entry_point() -> None:
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert '[project.entry-points.pytest11]\nevret = "evret_core.pytest_plugin"' in pyproject


# -- issue 24 (red-team P05): the session cache never hands a new retriever a freed one's results -----------------
class _Ranker:
    """Ranks the relevant document first (``perfect``) or not at all."""

    def __init__(self, perfect: bool) -> None:
        self.perfect = perfect

    def __call__(self, query: str, k: int) -> list[dict[str, str]]:
        return [{"doc_id": d} for d in (["a", "b"] if self.perfect else ["b", "c"])]


def test_a_new_retriever_at_a_freed_ones_address_is_evaluated_afresh() -> None:
    from evret_core import EvaluationDataset, QueryExample
    from evret_core.pytest_plugin import SessionEvaluations

    evaluate = SessionEvaluations()
    dataset = EvaluationDataset(queries=[QueryExample(query_id="q1", query_text="x", relevant_doc_ids=["a"])])
    bad = _Ranker(perfect=False)
    freed = id(bad)
    assert evaluate(dataset, bad, ["recall@1"]).scores["recall@1"] == 0.0
    del bad  # freed here, unless the cache holds it
    # CPython gives a freed address to a later object of the same size: land a new retriever on it, as the report
    # forced it (kept candidates never give their address back). Keyed on a bare id(), it got the bad one's 0.0
    made = [_Ranker(perfect=True) for _ in range(1)]
    while id(made[-1]) != freed and len(made) < 100_000:
        made.append(_Ranker(perfect=True))
    perfect = made[-1]
    assert evaluate(dataset, perfect, ["recall@1"]).scores["recall@1"] == 1.0
    assert evaluate(dataset, perfect, ["recall@1"]) is evaluate(dataset, perfect, ["recall@1"])  # still cached
