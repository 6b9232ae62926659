"""What the ``relevance`` judge's prompts share under ``fence_code="run"`` and ``"judgment"``: the prompts' common
token prefix, the ceiling of what a provider's prefix cache or batch prefill (evret-transformers ``share_prefix``)
can reuse.

The prompts are the ones the judge sends: its default messages, the schema sentence the LLM layer appends, caught
by a stub server on 127.0.0.1 (no model answers), in the order the judge sends them; tokenised with SmolLM2's chat
template (evret-transformers and the packaged ``smollm2-135m``). Two workloads from TREC DL 2019 (../shared): ``n``
qrels pairs drawn with seed 0 (as benchmarks/transformers_local.py draws them), and the first ``n`` judged passages
of the first drawn pair's query (pool judging). Printed per workload and fence code: average prompt tokens, the
common prefix, and the prompt tokens with that prefix fed once against every prompt fed whole.

    python benchmarks/fence_code.py [--n 32] [--shared ../shared]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
from pathlib import Path

from evret_core import create_judge
from evret_core.contracts.judge import JudgmentContext, reference_free_context
from evret_core.contracts.provider import ChatMessage
from evret_core.testing.llm_provider import stub_options
from evret_core.testing.llm_stubs import StubLLMServer, always

REPO = Path(__file__).resolve().parents[1]


def workloads(shared: Path, n: int) -> dict[str, list[JudgmentContext]]:
    """``n`` DL19 qrels pairs drawn with seed 0, and the first ``n`` judged passages of the first pair's query."""
    folder = shared / "datasets" / "trec-dl-2019"
    queries = dict(line.split("\t", 1) for line in (folder / "queries.tsv").read_text(encoding="utf-8").splitlines())
    lines = (folder / "qrels-pass.txt").read_text(encoding="utf-8").splitlines()
    pairs = [(line.split()[0], line.split()[2]) for line in random.Random(0).sample(lines, n)]
    one_query = [(line.split()[0], line.split()[2]) for line in lines if line.split()[0] == pairs[0][0]][:n]
    wanted = {docid for _, docid in pairs + one_query}
    texts: dict[str, str] = {}
    with (folder / "passages.jsonl").open(encoding="utf-8") as rows:
        for row in rows:
            record = json.loads(row)
            if record["docid"] in wanted:
                texts[record["docid"]] = record["doc"]
    return {name: [reference_free_context(queries[q].strip(), texts[d]) for q, d in chosen]
            for name, chosen in ((f"{n} pairs", pairs), (f"one query's {len(one_query)} passages", one_query))}


def sent_prompts(contexts: list[JudgmentContext], fence_code: str) -> list[list[ChatMessage]]:
    """The messages the relevance judge sends for ``contexts``, in the order it sends them."""
    with StubLLMServer(always('{"grade": 0}')) as server:
        judge = create_judge("relevance", **stub_options(server), cache=False, max_concurrency=1,
                             fence_code=fence_code)
        judge.batch_grade(contexts)
        return [[ChatMessage("system", r.system), ChatMessage("user", r.prompt)] for r in server.requests]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=32)
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    args = parser.parse_args()
    from evret_transformers import runtime
    from evret_transformers.provider import TransformersProvider

    provider = TransformersProvider("smollm2-135m", device="cpu", threads=1)
    asyncio.run(provider.warmup())
    tokenizer = provider._loaded.tokenizer
    print("| prompts | fence_code | average length | common prefix | prompt tokens, prefix fed once |")
    print("|---|---|---|---|---|")
    for name, contexts in workloads(args.shared, args.n).items():
        for fence_code in ("run", "judgment"):
            prompts = [runtime.prompt_ids(tokenizer, m) for m in sent_prompts(contexts, fence_code)]
            shortest = min(map(len, prompts))
            common = next((i for i in range(shortest) if len({p[i] for p in prompts}) > 1), shortest)
            total = sum(map(len, prompts))
            once = common + sum(len(p) - common for p in prompts)
            print(f"| {name} | `{fence_code}` | {total / len(prompts):.0f} | {common} | "
                  f"{total:,} -> {once:,} ({total / once:.2f}x) |", flush=True)


if __name__ == "__main__":
    main()
