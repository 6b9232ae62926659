"""LLM judging throughput against a stub that answers after 200 ms, through the real openai SDK.

Peers, measured in the same run: the ideal time (judgments / max_concurrency x latency) and a sequential run of
a sample. Checks: 500 judgments at max_concurrency 20 within 1.3x the ideal 5.0 s; a second run over the same
cache sends zero requests; with 10% of requests failing once with 429 every judgment is still measured.

    python benchmarks/llm.py            (needs evret-openai installed)
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

from evret_core.judges.llm import LLMJudge
from evret_core.models import JudgmentContext
from evret_core.testing.llm_stubs import FailFirst, StubLLMServer, always

N, CONCURRENCY, LATENCY = 500, 20, 0.2


def contexts(n: int, tag: str) -> list[JudgmentContext]:
    return [JudgmentContext(query=f"{tag} query {i}", expected_text=f"answer {i}", retrieved_text=f"passage {i}")
            for i in range(n)]


def run(server: StubLLMServer, cache: object, items: list[JudgmentContext], concurrency: int = CONCURRENCY
        ) -> tuple[float, list[bool | None], LLMJudge]:
    judge = LLMJudge(provider="openai", api_key="sk-bench", base_url=server.openai_base_url,
                     max_concurrency=concurrency, cache=cache)
    started, cpu = time.perf_counter(), time.process_time()
    answers = judge.batch_judge(items)
    CPU[0] = time.process_time() - cpu
    return time.perf_counter() - started, answers, judge


CPU = [0.0]  # client CPU seconds of the last run: the SDK's per-request work is what a busy machine pays for


def main() -> int:
    ideal = N / CONCURRENCY * LATENCY
    rows: list[tuple[str, str, str]] = []
    ok = True
    with tempfile.TemporaryDirectory() as tmp, StubLLMServer(always("YES", delay=LATENCY)) as server:
        run(server, False, contexts(1, "warm-up"))  # one-time SDK import, not part of any measurement
        sample = 10
        seq_time, _, _ = run(server, False, contexts(sample, "seq"), concurrency=1)
        rows.append((f"sequential, {sample} judgments (max_concurrency 1)", f"{seq_time:.2f} s",
                     f"{seq_time / (sample * LATENCY):.2f}x of {sample * LATENCY:.1f} s ideal"))
        server.reset()
        cache = os.path.join(tmp, "bench.sqlite3")
        items = contexts(N, "main")
        elapsed, answers, judge = run(server, cache, items)
        ratio = elapsed / ideal
        ok &= ratio <= 1.3 and all(a is True for a in answers)
        rows.append((f"{N} judgments, max_concurrency {CONCURRENCY}, 200 ms stub", f"{elapsed:.2f} s",
                     f"{ratio:.2f}x of {ideal:.1f} s ideal (target <= 1.3x); server max in flight "
                     f"{server.max_in_flight}; client CPU {CPU[0]:.1f} s on {os.cpu_count()} cores"))
        rows.append(("  sequential equivalent (extrapolated from the sample)", f"{seq_time / sample * N:.1f} s",
                     f"{seq_time / sample * N / elapsed:.1f}x slower than concurrent"))
        sent = len(server.requests)
        server.reset()
        elapsed2, answers2, judge2 = run(server, cache, items)
        ok &= len(server.requests) == 0 and answers2 == answers
        rows.append(("second run, same cache", f"{elapsed2:.3f} s",
                     f"{len(server.requests)} requests (first run sent {sent}); "
                     f"cache hits {judge2.stats()['cost']['openai']['cache_hits']}"))
    with StubLLMServer() as server:
        flaky = FailFirst(always("YES", delay=LATENCY), status=429,
                          select=lambda r: int(r.fingerprint[:8], 16) % 10 == 0)
        server.responder = flaky
        elapsed3, answers3, judge3 = run(server, False, contexts(N, "flaky"))
        measured = sum(a is not None for a in answers3)
        ok &= measured == N
        cost = judge3.stats()["cost"]["openai"]
        rows.append((f"{N} judgments, ~10% fail once with 429 (no Retry-After)", f"{elapsed3:.2f} s",
                     f"{measured}/{N} measured, {flaky.failed} 429s, {cost['retries']} retries, "
                     f"{elapsed3 / ideal:.2f}x of ideal"))
    print("| scenario | time | result |")
    print("|---|---|---|")
    for row in rows:
        print(f"| {' | '.join(row)} |")
    print("\nall checks passed" if ok else "\nCHECK FAILED", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
