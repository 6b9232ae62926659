"""LLM judging throughput against a stub that answers after 200 ms, through the real openai SDK.

Peers, measured in the same run: the ideal time (judgments / max_concurrency x latency) and a sequential run of
a sample. Checks: 500 judgments at max_concurrency 20 within 1.3x the ideal 5.0 s; a second run over the same
cache sends zero requests; with 10% of requests failing once with 429 every judgment is still measured. The stub
runs in its own process so that its threads do not share the judge's interpreter lock.

    python benchmarks/llm.py            (needs evret-openai installed)
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from typing import Any

from evret_core.contracts.judge import JudgmentContext
from evret_core.judge.llm import LLMJudge
from evret_core.testing.llm_stubs import FailFirst, always
from evret_core.testing.stub_process import StubProcess

N, CONCURRENCY, LATENCY = 500, 20, 0.2


def responder(flaky: bool) -> Any:
    """The stub's answers (built in the stub's process): every tenth request (by content) fails once with 429
    when ``flaky``."""
    answer = always("YES", delay=LATENCY)
    if flaky:
        return FailFirst(answer, status=429, select=lambda r: int(r.fingerprint[:8], 16) % 10 == 0)
    return answer


def Stub(flaky: bool = False) -> StubProcess:  # noqa: N802 - reads as the class it returns
    return StubProcess(responder, flaky)


def contexts(n: int, tag: str) -> list[JudgmentContext]:
    return [JudgmentContext(query=f"{tag} query {i}", expected_text=f"answer {i}", retrieved_text=f"passage {i}")
            for i in range(n)]


def run(stub: StubProcess, cache: object, items: list[JudgmentContext], concurrency: int = CONCURRENCY
        ) -> tuple[float, float, list[bool | None], LLMJudge]:
    """(wall seconds, client CPU seconds, answers, judge) of one batch_judge call."""
    judge = LLMJudge(provider="openai", api_key="sk-bench", base_url=stub.url + "/v1",
                     max_concurrency=concurrency, cache=cache)
    started, cpu = time.perf_counter(), time.process_time()
    answers = judge.batch_judge(items)
    return time.perf_counter() - started, time.process_time() - cpu, answers, judge


def main() -> int:
    ideal = N / CONCURRENCY * LATENCY
    rows: list[tuple[str, str, str]] = []
    ok = True
    with tempfile.TemporaryDirectory() as tmp, Stub() as stub:
        run(stub, False, contexts(1, "warm-up"))  # one-time SDK import, not part of any measurement
        sample = 10
        seq, _, _, _ = run(stub, False, contexts(sample, "seq"), concurrency=1)
        rows.append((f"sequential, {sample} judgments (max_concurrency 1)", f"{seq:.2f} s",
                     f"{seq / (sample * LATENCY):.2f}x of {sample * LATENCY:.1f} s ideal"))
        cache = os.path.join(tmp, "bench.sqlite3")
        items = contexts(N, "main")
        before = stub.stats()["requests"]
        elapsed, cpu, answers, _ = run(stub, cache, items)
        stats = stub.stats()
        sent = stats["requests"] - before
        ratio = elapsed / ideal
        ok &= ratio <= 1.3 and all(a is True for a in answers) and sent == N
        rows.append((f"{N} judgments, max_concurrency {CONCURRENCY}, 200 ms stub, cache on", f"{elapsed:.2f} s",
                     f"{ratio:.2f}x of {ideal:.1f} s ideal (target <= 1.3x); {sent} requests, server max in flight "
                     f"{stats['max_in_flight']}; client CPU {cpu:.1f} s"))
        rows.append(("  sequential equivalent (extrapolated from the sample)", f"{seq / sample * N:.1f} s",
                     f"{seq / sample * N / elapsed:.1f}x slower than concurrent"))
        before = stub.stats()["requests"]
        elapsed2, _, answers2, judge2 = run(stub, cache, items)
        again = stub.stats()["requests"] - before
        ok &= again == 0 and answers2 == answers
        rows.append(("second run, same cache", f"{elapsed2:.3f} s",
                     f"{again} requests; cache hits {judge2.stats()['cost']['openai']['cache_hits']}"))
    with Stub(flaky=True) as stub:
        run(stub, False, contexts(1, "warm-up"))
        before = stub.stats()["requests"]
        elapsed3, _, answers3, judge3 = run(stub, False, contexts(N, "flaky"))
        measured = sum(a is not None for a in answers3)
        failed_once = stub.stats()["requests"] - before - N
        ok &= measured == N
        cost = judge3.stats()["cost"]["openai"]
        rows.append((f"{N} judgments, ~10% fail once with 429 (no Retry-After)", f"{elapsed3:.2f} s",
                     f"{measured}/{N} measured, {failed_once} 429s, {cost['retries']} retries, "
                     f"{elapsed3 / ideal:.2f}x of ideal"))
    print(f"machine: {os.cpu_count()} CPU cores, load average {os.getloadavg()[0]:.1f}")
    print("| scenario | time | result |")
    print("|---|---|---|")
    for row in rows:
        print(f"| {' | '.join(row)} |")
    print("\nall checks passed" if ok else "\nCHECK FAILED", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
