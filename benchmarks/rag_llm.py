"""RAG harness with LLM generation and LLM claim judging against a stub answering after 200 ms.

300 synthetic questions x 2 conditions (gold, retrieved top 2), the ``llm`` generator and the LLM claim judge
through the test kit's ``stub`` provider, max_concurrency 20, each part with its own fresh answer cache. Peers in
the same run: the ideal time (LLM calls the stub received / 20 x 0.2 s), the staged path (generate everything,
then judge everything), whose results must be identical, and the pipelined run again with every answer cached
(the fixed cost: retrieval scoring, contexts, bootstrap, cache reads). Target: pipelined within 1.3x the ideal.
The stub runs in its own process, so its threads do not share the harness's interpreter lock.

    python benchmarks/rag_llm.py [--questions 300]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from typing import Any

from evret_core.contracts.retrieve import RetrievalResult
from evret_core.rag import QuestionSet, RagEvaluator, RagQuestion
from evret_core.testing.llm_provider import register_stub_provider
from evret_core.testing.rag_stub import rag_responder
from evret_core.testing.stub_process import StubProcess

CONCURRENCY, LATENCY, TARGET = 20, 0.2, 1.3


def Stub() -> StubProcess:  # noqa: N802 - reads as the class it returns
    return StubProcess(rag_responder, delay=LATENCY)


def question_set(n: int) -> tuple[QuestionSet, dict[str, list[RetrievalResult]]]:
    corpus = {f"d{i}": {"text": f"Item {i} of the archive is kept in room {i % 37}. It was catalogued in {1900 + i % 120}."}
              for i in range(n)}
    questions = [RagQuestion(question_id=f"q{i}", question=f"Where is item {i} of the archive kept?",
                             answers=[[f"room {i % 37}"]], gold_doc_ids=[f"d{i}"]) for i in range(n)]
    run = {f"q{i}": [RetrievalResult(doc_id=f"d{i}", score=2.0), RetrievalResult(doc_id=f"d{(i + 1) % n}", score=1.0)]
           for i in range(n)}
    return QuestionSet(questions=questions, corpus=corpus, name="synthetic"), run


def measure(stub: StubProcess, questions: QuestionSet, run: dict[str, list[RetrievalResult]], pipelined: bool,
            cache: str) -> tuple[float, int, Any]:
    options = {"provider": "stub", "model": "gpt-stub", "base_url": stub.openai_base_url, "api_key": "sk-bench",
               "max_concurrency": CONCURRENCY, "cache": cache}
    evaluator = RagEvaluator(run, "llm", generator_options=options, k=2, claim_judge="llm",
                             claim_judge_options=options, pipelined=pipelined, n_resamples=200)
    before = stub.stats()["requests"]
    started = time.perf_counter()
    results = evaluator.evaluate(questions)
    return time.perf_counter() - started, stub.stats()["requests"] - before, results


def comparable(results: Any) -> str:
    data = json.loads(results.to_json())
    data.pop("stats")
    return json.dumps(data, sort_keys=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--questions", type=int, default=300)
    n = parser.parse_args().questions
    register_stub_provider()
    questions, run = question_set(n)
    with tempfile.TemporaryDirectory() as tmp, Stub() as stub:
        os.environ["EVRET_CACHE_DIR"] = tmp
        warm, warm_run = question_set(2)
        measure(stub, warm, warm_run, True, os.path.join(tmp, "warm"))  # imports, first connections
        rows = []
        outputs = {}
        for label, pipelined in (("pipelined", True), ("staged", False)):
            cpu = time.process_time()
            elapsed, calls, results = measure(stub, questions, run, pipelined, os.path.join(tmp, label))
            ideal = calls / CONCURRENCY * LATENCY
            rows.append((label, elapsed, calls, ideal, elapsed / ideal, time.process_time() - cpu,
                         stub.stats()["max_in_flight"]))
            outputs[label] = comparable(results)
        # the fixed cost (retrieval scoring, contexts, bootstrap, cache reads): the pipelined run again, all cached
        cpu = time.process_time()
        elapsed, calls, _ = measure(stub, questions, run, True, os.path.join(tmp, "pipelined"))
        rows.append(("cached", elapsed, calls, 0.0, 0.0, time.process_time() - cpu, stub.stats()["max_in_flight"]))
    print(f"{n} questions x 2 conditions, llm generator + llm claim judge, stub {LATENCY * 1000:.0f} ms, "
          f"max_concurrency {CONCURRENCY}, load average {os.getloadavg()[0]:.1f}")
    print(f"{'path':<10} {'seconds':>8} {'LLM calls':>10} {'ideal s':>8} {'ratio':>6} {'client CPU s':>13}")
    for label, elapsed, calls, ideal, ratio, cpu, _ in rows:
        shown = f"{ideal:8.2f} {ratio:6.2f}" if ideal else f"{'-':>8} {'-':>6}"
        print(f"{label:<10} {elapsed:8.2f} {calls:10d} {shown} {cpu:13.2f}")
    print(f"server max in flight: {rows[-1][6]} (bound {CONCURRENCY})")
    same = outputs["pipelined"] == outputs["staged"]
    print(f"results identical (pipelined vs staged): {same}")
    ok = same and rows[0][4] <= TARGET and rows[-1][6] <= CONCURRENCY
    print(f"pipelined ratio {rows[0][4]:.2f} (target <= {TARGET}): {'OK' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
