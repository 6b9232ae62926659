"""The ``transformers`` provider against calling the model directly: time per answer token, free and constrained.

Peer, measured in the same run on the same prompt and model: transformers' own ``model.generate`` (greedy, KV
cache, exactly N new tokens). Measured: the provider's free text and its JSON constrained to the RAG generator's
schema (``GeneratedAnswer``: strings, arrays, booleans), both through ``acomplete`` (thread hand-off, prompt
building, Evret's generation loop, and for JSON the grammar and the token mask). Two random Llamas built here
(:func:`evret_transformers.tiny.build_tiny_model`, tokenizer trained on docs/ with a vocabulary of about 4,000):
a tiny one, where the Python per token dominates (the worst case for the ratio), and a wider one where the
forward pass does. One CPU thread. Ratios are of milliseconds per generated token, best of 3.

``--real`` measures the packaged GGUF models instead (``smollm2-135m``, ``gemma3-270m``; those installed), in a
fresh Evret cache folder: the first load (GGUF conversion) and a cached one, a prefill with the last position's
scores only against every position's, and milliseconds per answer token free and constrained (a graded verdict,
``RelevanceGrade``, and the RAG generator's ``GeneratedAnswer``), the first constrained call (the vocabulary index
and the grammar's states) apart, and the allowed tokens of the structural states on a path through each schema
found by the token trie against the first-character scan it replaced.

``--batch`` measures verdicts (the ``relevance`` judge's messages, one fence code, and its schema on TREC DL 2019
pairs from ../shared) sent all at once: first the prompts' common token prefix (the ceiling of prefix sharing:
prompt tokens against prompt tokens once the prefix is fed once), with the fence code fixed and drawn per verdict
as the judge draws it, for the pairs and for as many passages of one query; then, for each workload
(``--workloads``, default ``pairs,query``: ``--n`` pairs of different queries, and the first ``--n`` judged
passages of the first pair's query, as pool judging grades them), ``max_batch`` 1 (the peer: one at a time), 8
and 32 (``--sizes``, default ``1,8,32``) with prefix sharing on (``--share``, default ``on``; ``on,off`` adds
the rows without it): wall and CPU time of this process (its torch threads included: the other processes on the
machine slow the wall clock, less the CPU time) against the peer's in the same run, how many answers equal the
peer's, the token positions fed (padding included; those of the prompts' passes apart) and the forward passes;
``--no-jump`` skips the jump-forward rows (8 verdicts one at a time with it off and on); then (unless
``--no-children``), for each model in a child process of its own, the first constrained call with the token
strings decoded (the saved file removed first) and read back from the file saved beside the conversion, and the
child's peak resident memory (``--no-batches``: those only). ``--cache DIR`` keeps the conversions in DIR between
runs (default: a fresh temporary folder, so the first load converts).

    python benchmarks/transformers_local.py [--real | --batch [--no-batches] [--no-jump] [--sizes 1,8,32]
        [--share on,off] [--workloads pairs,query] [--no-children]] [--cache DIR] [--threads N] [--n N]
        [smollm2-135m] [gemma3-270m]
        (needs evret-transformers installed; --real and --batch its [gguf] extra and the model packages)
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from evret_transformers import runtime
from evret_transformers.provider import TransformersProvider
from evret_transformers.tiny import build_tiny_model

from evret_core.contracts.provider import ChatMessage
from evret_core.rag.generate.llm_generator import GeneratedAnswer

N = 96
REPEATS = 5
MESSAGES = [ChatMessage("system", "You answer questions from the context, in JSON."),
            ChatMessage("user", "Context: the library closes at 5 pm on Saturdays. Question: when does it close?")]
SIZES = {"tiny (2 x 32)": (32, 2), "wider (4 x 512)": (512, 4)}
REAL_TOKENS, REAL_REPEATS = 32, 2  # the packaged models: fewer, shorter answers (seconds each on a CPU)


def best(run: Any, repeats: int = REPEATS) -> tuple[float, int]:
    """(best seconds per token, tokens) of ``repeats`` runs of ``run() -> tokens``."""
    times, tokens = [], 0
    for _ in range(repeats):
        started = time.perf_counter()
        tokens = run()
        times.append((time.perf_counter() - started) / max(tokens, 1))
    return min(times), tokens


def measure(folder: Path) -> dict[str, tuple[float, int]]:
    provider = TransformersProvider(str(folder), max_new_tokens=N, device="cpu")
    loaded = runtime.load(provider.source, "cpu", "auto")
    ids = torch.tensor([runtime.prompt_ids(loaded.tokenizer, MESSAGES)])

    def direct() -> int:
        with torch.inference_mode():
            out = loaded.model.generate(ids, max_new_tokens=N, min_new_tokens=N, do_sample=False,
                                        pad_token_id=loaded.tokenizer.pad_token_id)
        return int(out.shape[1] - ids.shape[1])

    def free() -> int:
        return asyncio.run(provider.acomplete(MESSAGES)).output_tokens

    schema = GeneratedAnswer.model_json_schema()

    def constrained() -> int:
        return asyncio.run(provider.acomplete(MESSAGES, json_schema=schema)).output_tokens

    constrained()  # warm-up: the vocabulary index and the grammar are built once per model and schema
    return {"model.generate": best(direct), "provider, free text": best(free),
            "provider, constrained JSON": best(constrained)}


def scan_allowed(constraint: Any, state: Any, by_first: dict[str, list[int]]) -> int:
    """The allowed tokens of a structural state as found before the trie (every first character through the
    grammar, then each token of an accepted one whole): the peer of the trie walk; returns their count."""
    ids: list[int] = []
    for first, candidates in by_first.items():
        if constraint.grammar.advance(state, first):
            constraint._check(state, candidates, ids, [])
    return len(ids)


def trie_against_scan(loaded: Any, schema: Any) -> str:
    """Seconds for the allowed tokens of every structural state on one greedy path through ``schema``'s grammar,
    by the first-character scan and by the trie (both without memo)."""
    from evret_transformers.tokens import TokenConstraint

    rules = runtime.constraint(loaded, schema)
    by_first: dict[str, list[int]] = {}
    for token_id, text in enumerate(rules.index.strings):
        if text and "\ufffd" not in text:
            by_first.setdefault(text[0], []).append(token_id)
    state, states = rules.grammar.initial(), []
    while rules.grammar.cost(state) > 0 and len(states) < 64:  # the shortest continuation, token by token
        ids, costs = rules.allowed(state)
        if not TokenConstraint._free_string(state):
            states.append(state)
        state = rules.grammar.advance(state, rules.index.strings[ids[costs.index(min(costs))]] or "")
    started = time.perf_counter()
    for state in states:
        scan_allowed(rules, state, by_first)
    scan = time.perf_counter() - started
    fresh = TokenConstraint(rules.grammar, rules.index)
    started = time.perf_counter()
    for state in states:
        fresh.allowed(state)
    trie = time.perf_counter() - started
    return f"{len(states)} structural states: scan {scan * 1000:.1f} ms, trie {trie * 1000:.1f} ms ({scan / trie:.1f}x)"


def measure_real(model: str) -> None:
    """One packaged model's rows (see the module), printed."""
    import os

    from evret_transformers import gguf
    from evret_transformers.provider import TransformersProvider as Provider

    from evret_core.rag.scores.relevance import RelevanceGrade

    def warm(provider: Provider) -> float:
        started = time.perf_counter()
        asyncio.run(provider.warmup())
        return time.perf_counter() - started

    with tempfile.TemporaryDirectory() as fresh:
        os.environ["EVRET_CACHE_DIR"] = _option("--cache", fresh)
        provider = Provider(model, max_new_tokens=REAL_TOKENS, device="cpu", threads=1)
        first = warm(provider)
        runtime._LOADED.clear()
        cached = warm(Provider(model, max_new_tokens=REAL_TOKENS, device="cpu", threads=1))
        loaded = runtime.load(provider.source, "cpu", "auto")
        print(f"{model}: vocabulary {len(loaded.tokenizer)}, conversions {gguf.conversions}; first load "
              f"{first:.1f} s, cached load {cached:.2f} s")
        ids = torch.tensor([runtime.prompt_ids(loaded.tokenizer, MESSAGES)])

        def prefill(last: bool) -> float:
            times = []
            for _ in range(REAL_REPEATS + 1):
                started = time.perf_counter()
                with torch.inference_mode():
                    loaded.model(input_ids=ids, **({"logits_to_keep": 1} if last else {}))
                times.append(time.perf_counter() - started)
            return min(times)

        full, last = prefill(False), prefill(True)
        print(f"  prefill {ids.shape[1]} tokens: every position {full * 1000:.0f} ms, last position "
              f"{last * 1000:.0f} ms ({full / last:.2f}x)")
        free_s, free_n = best(lambda: asyncio.run(provider.acomplete(MESSAGES)).output_tokens, REAL_REPEATS)
        print(f"  free text                       {free_s * 1000:7.1f} ms/token  ({free_n} tokens)   1.00x")
        for schema in (RelevanceGrade, GeneratedAnswer):
            js = schema.model_json_schema()
            started = time.perf_counter()
            asyncio.run(provider.acomplete(MESSAGES, json_schema=js))
            once = time.perf_counter() - started
            seconds, tokens = best(lambda js=js: asyncio.run(provider.acomplete(MESSAGES, json_schema=js)).output_tokens,
                                   REAL_REPEATS)
            print(f"  constrained {schema.__name__:20s}{seconds * 1000:7.1f} ms/token  ({tokens} tokens)  "
                  f"{seconds / free_s:5.2f}x; first call {once:.1f} s; allowed tokens of "
                  f"{trie_against_scan(loaded, js)}")
        runtime._LOADED.clear()


def dl19_messages(n: int, nonce: str | None = "0" * 16, one_query: bool = False) -> list[list[ChatMessage]]:
    """The relevance judge's messages (system prompt with the schema sentence; the fence code ``nonce``, or drawn
    per verdict as the judge draws it when None) for ``n`` TREC DL 2019 qrels pairs drawn with seed 0, or with
    ``one_query`` the first ``n`` judged passages of the first drawn pair's query (pool judging)."""
    import json

    from fence_code import workloads  # benchmarks/: the DL19 pairs and one query's passages, drawn once

    from evret_core.judge.relevance_judge import RelevanceJudge

    pairs, passages = workloads(Path(__file__).parents[1].parent / "shared", n).values()
    from evret_core.judge import relevance_judge as module

    schema = json.dumps(module.RelevanceAnswer.model_json_schema(), separators=(",", ":"))
    out = []
    for context in passages if one_query else pairs:
        messages = RelevanceJudge.messages(_JUDGE, context, nonce=nonce)
        out.append([ChatMessage("system", messages[0].content + module._SCHEMA_SENTENCE + schema), messages[1]])
    return out


class _Judge:
    """What :meth:`RelevanceJudge.messages` reads, without building a judge (which needs a provider)."""

    def __init__(self) -> None:
        from evret_core.judge import relevance_judge as module

        self.fencing = "nonce"
        self.system_prompt = module.DEFAULT_SYSTEM_PROMPT
        self.prompt_template = module.DEFAULT_PROMPT_TEMPLATE


_JUDGE: Any = _Judge()


def common_prefix(loaded: Any, n: int) -> None:
    """The prompts' common token prefix and the prompt tokens fed with it shared, for the judge's prompts as
    measured (fixed fence code) and as the judge sends them (a code per verdict), ``n`` pairs or one query's
    ``n`` passages; printed."""
    for label, nonce, one_query in (("pairs, fixed fence code", "0" * 16, False),
                                    ("pairs, a fence code per verdict", None, False),
                                    ("one query's passages, fixed fence code", "0" * 16, True),
                                    ("one query's passages, a fence code per verdict", None, True)):
        prompts = [runtime.prompt_ids(loaded.tokenizer, m) for m in dl19_messages(n, nonce, one_query)]
        common = next((i for i in range(min(map(len, prompts))) if len({p[i] for p in prompts}) > 1),
                      min(map(len, prompts)))
        total = sum(map(len, prompts))
        once = common + sum(len(p) - common for p in prompts)
        print(f"  {len(prompts)} {label}: prompts {total / len(prompts):.0f} tokens on average, common prefix "
              f"{common} tokens; prompt tokens {total} -> {once} with it fed once ({total / once:.2f}x)", flush=True)


def measure_batches(model: str, threads: int, n: int) -> None:
    """Verdicts per second at each ``--sizes`` and ``--share`` (all ``n`` calls sent at once), wall and CPU time
    against one at a time measured in the same run, for each ``--workloads`` (``pairs``: ``n`` DL19 pairs of
    different queries; ``query``: one query's ``n`` passages), one fence code; printed."""
    import os
    import sys

    from evret_core.judge.relevance_judge import RelevanceAnswer

    schema = RelevanceAnswer.model_json_schema()
    warm = TransformersProvider(model, max_new_tokens=16, device="cpu", threads=threads)
    asyncio.run(warm.warmup())
    loaded = warm._loaded
    common_prefix(loaded, n)
    window = getattr(loaded.model.config.get_text_config(), "sliding_window", None)
    if window is not None:
        print(f"  sliding window of {window} slots: only the rows whose prompt, 16 answer tokens and "
              f"{runtime.DRAFT_ROOM} of drafts stay within it share the prefix", flush=True)
    asyncio.run(warm.acomplete(dl19_messages(1)[0], json_schema=schema))  # the index and states, once
    few = dl19_messages(8)
    # one at a time, the forced text fed token by token, then in one pass
    for jump in () if "--no-jump" in sys.argv[1:] else (False, True):
        before, started = loaded.forwards, time.perf_counter()
        texts = [runtime.submit(loaded, runtime.Call(messages=m, temperature=0.0, max_new_tokens=16, seed=0,
                                                     json_schema=schema, jump_forward=jump), 1, 0).result()[0]
                 for m in few]
        seconds = time.perf_counter() - started
        if not jump:
            plain, plain_seconds = texts, seconds
        print(f"  one at a time, jump-forward {'on ' if jump else 'off'}: {seconds / len(few) * 1000:6.0f} ms a verdict"
              f" ({plain_seconds / seconds:4.2f}x), {(loaded.forwards - before) / len(few):.1f} forward passes a "
              f"verdict; answers equal: {sum(a == b for a, b in zip(texts, plain, strict=True))}/{len(few)}; load "
              f"{os.getloadavg()[0]:.1f}", flush=True)
    sizes = [int(size) for size in _option("--sizes", "1,8,32").split(",")]
    shares = [share == "on" for share in _option("--share", "on").split(",")]
    for workload in _option("--workloads", "pairs,query").split(","):
        conversations = dl19_messages(n, one_query=workload == "query")
        print(f"  {n} {'pairs of different queries' if workload == 'pairs' else 'passages of one query'}, "
              f"one fence code:", flush=True)
        first: list[str] = []
        base = base_cpu = 0.0
        for size in sizes:
            for share in shares if size > 1 else [False]:
                provider = TransformersProvider(model, max_new_tokens=16, device="cpu", threads=threads,
                                                max_batch=size, batch_window_ms=50, share_prefix=share)
                asyncio.run(provider.warmup())

                async def ask(provider: TransformersProvider = provider, conversations: Any = conversations
                              ) -> list[Any]:
                    return await asyncio.gather(*(provider.acomplete(m, json_schema=schema) for m in conversations))

                fed, shared, prefilled, forwards = loaded.fed, loaded.shared, loaded.prefilled, loaded.forwards
                started, cpu = time.perf_counter(), time.process_time()
                answers = asyncio.run(ask())
                seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
                texts = [a.text for a in answers]
                if size == 1:
                    first, base, base_cpu = texts, seconds, cpu
                prompt = sum(a.input_tokens for a in answers) / n
                load = os.getloadavg()[0]
                label = "(peer)" if size == 1 else f"sharing {'on ' if share else 'off'}"
                print(f"    max_batch {size:2d} {label:11s}: {n} verdicts in {seconds:6.1f} s wall ({base / seconds:4.2f}x "
                      f"one at a time), {cpu:6.1f} s CPU ({base_cpu / cpu:4.2f}x); answers equal to one at a time: "
                      f"{sum(a == b for a, b in zip(texts, first, strict=True))}/{n}; prompts {prompt:.0f} tokens on "
                      f"average, positions fed {loaded.fed - fed} (prompt passes {loaded.prefilled - prefilled}), "
                      f"forward passes {loaded.forwards - forwards}, prompt tokens shared {loaded.shared - shared}; "
                      f"load {load:.1f}", flush=True)


def child(model: str, threads: int) -> None:
    """In a process of its own: load, the first constrained call, peak resident memory (printed as one line)."""
    import resource

    from evret_core.judge.relevance_judge import RelevanceAnswer

    provider = TransformersProvider(model, max_new_tokens=16, device="cpu", threads=threads)
    started = time.perf_counter()
    asyncio.run(provider.warmup())
    loaded = time.perf_counter() - started
    started = time.perf_counter()
    asyncio.run(provider.acomplete(dl19_messages(1)[0], json_schema=RelevanceAnswer.model_json_schema()))
    first = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"load {loaded:.1f} s, first constrained call {first:.1f} s, peak RSS {peak:.0f} MB")


def measure_children(model: str, threads: int) -> None:
    """The child run twice: token strings decoded (their saved file removed), then read back from the file."""
    import os
    import subprocess
    import sys

    from evret_transformers import gguf
    from evret_transformers import provider as provider_module

    # the saved strings found without loading the model here: the children's peak memory counts the parent's
    # at their start (it survives exec), so the parent stays small
    provider = TransformersProvider(model, max_new_tokens=16, device="cpu", threads=threads)
    saved = list(gguf.cache_root().glob(f"{provider.fingerprint[:16]}-*{provider_module.STRINGS}"))
    for label in ("strings decoded", "strings read back"):
        if label == "strings decoded":
            for path in saved:
                path.unlink(missing_ok=True)
        line = subprocess.run([sys.executable, __file__, "--child", model, "--threads", str(threads)],
                              capture_output=True, text=True, check=True, env=os.environ).stdout.strip()
        print(f"  child process, {label}: {line.splitlines()[-1]}; load {os.getloadavg()[0]:.1f}", flush=True)


def _option(name: str, default: str) -> str:
    import sys

    args = sys.argv[1:]
    return args[args.index(name) + 1] if name in args else default


def main() -> None:
    import os
    import sys

    threads = int(_option("--threads", "1"))
    torch.set_num_threads(threads)
    models = [a for a in sys.argv[1:] if a in ("smollm2-135m", "gemma3-270m")]
    if "--child" in sys.argv[1:]:
        child(models[0], threads)
        return
    if "--batch" in sys.argv[1:]:
        with tempfile.TemporaryDirectory() as fresh:
            os.environ["EVRET_CACHE_DIR"] = _option("--cache", fresh)
            for model in models or ["smollm2-135m", "gemma3-270m"]:
                print(f"{model}, {threads} thread(s); uptime: {os.popen('uptime').read().strip()}", flush=True)
                if "--no-batches" not in sys.argv[1:]:
                    measure_batches(model, threads, int(_option("--n", "32")))
                if "--no-children" not in sys.argv[1:]:
                    measure_children(model, threads)
                runtime._LOADED.clear()
        return
    if "--real" in sys.argv[1:]:
        import importlib.util

        from evret_transformers import gguf

        for model in [a for a in sys.argv[1:] if a in gguf.PACKAGED] or list(gguf.PACKAGED):
            try:
                gguf.resolve(model)
            except Exception as exc:  # a package not installed: said, and the other model measured
                print(f"{model}: not measured: {exc}")
                continue
            if importlib.util.find_spec("gguf") is None:
                print(f"{model}: not measured: {gguf.EXTRA}")
                continue
            measure_real(model)
        return
    corpus = [p.read_text(encoding="utf-8") for p in sorted(Path(__file__).parents[1].glob("docs/*.md"))]
    with tempfile.TemporaryDirectory() as tmp:
        for label, (hidden, layers) in SIZES.items():
            folder = build_tiny_model(Path(tmp) / label.split()[0], hidden=hidden, layers=layers, corpus=corpus,
                                      vocab_size=4000)
            results = measure(folder)
            vocab = len(runtime.load(str(folder.resolve()), "cpu", "auto").tokenizer)
            peer = results["model.generate"][0]
            print(f"{label} random Llama, vocabulary {vocab}, {N} new tokens at most, best of {REPEATS}:")
            for name, (seconds, tokens) in results.items():
                print(f"  {name:28s} {seconds * 1000:7.2f} ms/token  ({tokens} tokens)  {seconds / peer:5.2f}x")


if __name__ == "__main__":
    main()
