"""The execution seam: the CLI and config pick an executor by name, a plugin's ``sys.exit()`` in any stage of any
executor is that plugin's error, and a shared in-flight limiter bounds the calls of several LLM clients together
(what evret-ray backs with a Ray actor)."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from evret_core import EvaluationDataset, Evaluator, PluginError, QueryExample
from evret_core.cli import main
from evret_core.contracts.executor import shared_limiter, use_shared_limiter
from evret_core.judge.llm import LLMJudge
from evret_core.testing.llm_provider import stub_options
from evret_core.testing.llm_stubs import StubLLMServer, always, isolate_llm_env
from evret_core.testing.llm_stubs import judgment_context as ctx

from .._helpers import FakePlugin
from .._paths import REPO


class SemaphoreLimiter:
    """An in-process InFlightLimiter: enough to show that clients obey one shared bound."""

    def __init__(self, limit: int) -> None:
        self.sem = asyncio.Semaphore(limit)
        self.acquired = 0

    async def acquire(self) -> None:
        await self.sem.acquire()
        self.acquired += 1

    def release(self) -> None:
        self.sem.release()


@pytest.fixture
def stub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[StubLLMServer]:
    isolate_llm_env(monkeypatch, tmp_path, "EVRET_STUB_API_KEY")
    with StubLLMServer(always("YES", delay=0.05)) as server:
        yield server


def test_a_shared_limiter_bounds_several_clients_together(stub: StubLLMServer) -> None:
    judges = [LLMJudge(cache=False, max_concurrency=8, **stub_options(stub)) for _ in range(2)]

    async def both() -> list[list[bool | None]]:
        limiter = SemaphoreLimiter(3)
        with use_shared_limiter(limiter):
            assert shared_limiter() is limiter
            got = await asyncio.gather(*(j.abatch_judge([ctx(i + 100 * n) for i in range(12)])
                                         for n, j in enumerate(judges)))
        assert limiter.acquired == 24
        return list(got)

    answers = asyncio.run(both())
    assert answers == [[True] * 12, [True] * 12]
    assert stub.max_in_flight == 3  # 16 allowed by the two clients, 3 by the shared bound
    assert shared_limiter() is None


def test_without_a_shared_limiter_the_clients_bound_alone(stub: StubLLMServer) -> None:
    judge = LLMJudge(cache=False, max_concurrency=8, **stub_options(stub))
    assert judge.batch_judge([ctx(i) for i in range(16)]) == [True] * 16
    assert stub.max_in_flight > 3


def _example(tmp_path: Path) -> Path:
    for name in ("eval.toml", "dataset.jsonl", "corpus.jsonl"):
        shutil.copy(REPO / "examples" / name, tmp_path / name)
    return tmp_path / "eval.toml"


def test_cli_executor_flag_and_config_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _example(tmp_path)
    assert main(["evaluate", "--config", str(config), "--no-progress", "--output", str(tmp_path / "a.json")]) == 0
    assert main(["evaluate", "--config", str(config), "--no-progress", "--executor", "local",
                 "--output", str(tmp_path / "b.json")]) == 0
    config.write_text(config.read_text(encoding="utf-8") + '\n[executor]\nname = "local"\n', encoding="utf-8")
    assert main(["evaluate", "--config", str(config), "--no-progress", "--output", str(tmp_path / "c.json")]) == 0
    runs = [json.loads((tmp_path / f"{n}.json").read_text(encoding="utf-8")) for n in "abc"]
    assert all(r["config"]["executor"] == {"name": "local"} for r in runs)
    assert runs[0]["scores"] == runs[1]["scores"] == runs[2]["scores"]
    capsys.readouterr()
    assert main(["evaluate", "--config", str(config), "--no-progress", "--executor", "nope"]) == 2
    assert "executor 'nope'" in capsys.readouterr().err
    assert main(["evaluate", "--config", str(config), "--no-progress", "--executor-option", "workers=2"]) == 2
    assert "executor 'local': bad options" in capsys.readouterr().err


EXITS_IN_STAGES = """
import sys

from evret_core.sdk import Generator, Metric, hookimpl


class ExitingMetric(Metric):
    family = "exits"

    def compute(self, batch):
        sys.exit(11)


class ExitingGenerator(Generator):
    name = "exits"

    def generate(self, request):
        sys.exit(12)


@hookimpl
def register_metrics(register):
    register("exits", ExitingMetric)


@hookimpl
def register_generators(register):
    register("exits", ExitingGenerator)
"""

# an executor from another plugin, running every stage in-process through the base (as evret-ray does for a
# retriever kept on the driver, or a single metric chunk)
ENGINE = """
from evret_core.sdk import Executor, hookimpl


class Engine(Executor):
    name = "engine"

    def retrieve(self, retriever, batches, k, progress):
        return super().retrieve(retriever, batches, k, progress)

    def judge(self, judge, contexts, batch_size, progress):
        return super().judge(judge, contexts, batch_size, progress)

    def metrics(self, metrics, batches):
        return super().metrics(metrics, batches)

    def generate(self, runner, requests, progress):
        return super().generate(runner, requests, progress)


@hookimpl
def register_executors(register):
    register("engine", Engine)
"""


@pytest.mark.parametrize("executor", ["local", "engine"])
def test_a_plugins_sys_exit_in_the_metrics_and_generate_stages_is_its_plugin_error(
    fake_plugin: FakePlugin, executor: str
) -> None:
    """The Executor base converts nothing (contracts import no plugin loader): the evaluator and the RAG harness
    run each stage under plugin_exits_as_errors, so the exit is named after the plugin whose code called it,
    whichever executor ran the stage."""
    from evret_core.rag import QuestionSet, RagEvaluator

    fake_plugin("evret-exits-in-stages", EXITS_IN_STAGES)
    fake_plugin("evret-engine", ENGINE)
    dataset = EvaluationDataset(queries=[QueryExample(query_id="q", query_text="t", relevant_doc_ids=["a"])])
    named = r"plugin 'evret-exits-in-stages' \(distribution evret-exits-in-stages 0\.1\.0\) called sys\.exit\({}\) "
    with pytest.raises(PluginError, match=named.format(11) + "while evret ran it"):
        Evaluator({"q": {"a": 1.0}}, metrics=["exits@1"], executor=executor).evaluate(dataset)
    questions = QuestionSet.from_records(
        [{"id": "q1", "question": "What do bees make?", "answers": ["wax"], "gold_doc_ids": ["d1"]}],
        corpus={"d1": {"text": "Bees make wax."}})
    with pytest.raises(PluginError, match=named.format(12) + "while evret ran it"):
        RagEvaluator(generator="exits", conditions=["gold"], n_resamples=10, executor=executor).evaluate(questions)
