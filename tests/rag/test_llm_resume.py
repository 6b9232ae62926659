"""A RAG run with the ``llm`` generator killed mid-way (SIGKILL, in a subprocess) resumes from the LLM layer's
cache: the rerun asks only for the answers the killed run had not received."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evret_core.testing.llm_stubs import StubLLMServer
from evret_core.testing.rag_stub import kind_of, rag_responder

N = 20
SCRIPT = """
import sys
from evret_core.rag import QuestionSet, RagEvaluator
from evret_core.testing.llm_provider import register_stub_provider

register_stub_provider()
base_url, folder = sys.argv[1], sys.argv[2]
questions = QuestionSet.load(folder + "/questions.jsonl", corpus=folder + "/corpus.jsonl")
options = {"provider": "stub", "model": "gpt-stub", "base_url": base_url, "api_key": "sk-stub",
           "max_concurrency": 2, "cache": folder + "/cache.sqlite3"}
results = RagEvaluator(None, "llm", generator_options=options, conditions=["gold"], n_resamples=10).evaluate(questions)
results.to_json(folder + "/rag.json")
"""


def generated(server: StubLLMServer) -> int:
    return sum(kind_of(r) == "generate" for r in server.requests)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_killed_run_resumes_without_repeating_paid_calls(tmp_path: Path) -> None:
    with (tmp_path / "corpus.jsonl").open("w") as corpus, (tmp_path / "questions.jsonl").open("w") as qs:
        for i in range(N):
            corpus.write(json.dumps({"id": f"d{i}", "text": f"Box {i} is stored on shelf {i + 100}."}) + "\n")
            qs.write(json.dumps({"id": f"q{i}", "question": f"Where is box {i} stored?",
                                 "answers": [f"shelf {i + 100}"], "gold_doc_ids": [f"d{i}"]}) + "\n")
    (tmp_path / "run.py").write_text(SCRIPT)
    env = {**os.environ, "EVRET_CACHE_DIR": str(tmp_path / "default-cache")}
    command = [sys.executable, str(tmp_path / "run.py")]
    with StubLLMServer(rag_responder(delay=0.1)) as server:
        child = subprocess.Popen([*command, server.openai_base_url, str(tmp_path)], env=env)
        deadline = time.monotonic() + 60
        while generated(server) < 8 and time.monotonic() < deadline and child.poll() is None:
            time.sleep(0.01)
        child.send_signal(signal.SIGKILL)
        assert child.wait(30) == -signal.SIGKILL
        assert not (tmp_path / "rag.json").exists()
        with sqlite3.connect(tmp_path / "cache.sqlite3") as db:
            stored = db.execute("SELECT COUNT(*) FROM judgments WHERE judge = 'rag-generator'").fetchone()[0]
        assert 0 < stored < N
        first = generated(server)
        server.reset()
        done = subprocess.run([*command, server.openai_base_url, str(tmp_path)], env=env, timeout=120)
        assert done.returncode == 0
        assert generated(server) == N - stored  # only what the killed run had not received
    assert first >= stored  # the killed run paid for each stored answer once
    results = json.loads((tmp_path / "rag.json").read_text())
    answers = [q["conditions"]["gold"]["answer"] for q in results["per_question"].values()]
    assert len(answers) == N and all(a is not None and a["claims"] for a in answers)
