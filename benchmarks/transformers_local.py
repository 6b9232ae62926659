"""The ``transformers`` provider against calling the model directly: time per answer token, free and constrained.

Peer, measured in the same run on the same prompt and model: transformers' own ``model.generate`` (greedy, KV
cache, exactly N new tokens). Measured: the provider's free text and its JSON constrained to the RAG generator's
schema (``GeneratedAnswer``: strings, arrays, booleans), both through ``acomplete`` (thread hand-off, prompt
building, Evret's generation loop, and for JSON the grammar and the token mask). Two random Llamas built here
(:func:`evret_transformers.tiny.build_tiny_model`, tokenizer trained on docs/ with a vocabulary of about 4,000):
a tiny one, where the Python per token dominates (the worst case for the ratio), and a wider one where the
forward pass does. One CPU thread. Ratios are of milliseconds per generated token, best of 3.

    python benchmarks/transformers_local.py        (needs evret-transformers installed)
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


def best(run: Any) -> tuple[float, int]:
    """(best seconds per token, tokens) of ``REPEATS`` runs of ``run() -> tokens``."""
    times, tokens = [], 0
    for _ in range(REPEATS):
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


def main() -> None:
    torch.set_num_threads(1)
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
