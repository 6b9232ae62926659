"""Batched generation on a tiny random Llama: calls that arrive together run as one left-padded batch, and each
call's answer is the one it gets alone (greedy: the same tokens), free or under a schema, whatever its prompt
length, budget or stop; a call cancelled mid-batch leaves only its row."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from evret_transformers import runtime
from evret_transformers.provider import TransformersProvider

from evret_core import EvretError
from evret_core.contracts.provider import ChatMessage
from evret_core.criteria.direct import DirectAnswer
from evret_core.llm.choices import with_choices
from evret_core.rag.generate.llm_generator import GeneratedAnswer
from evret_core.rag.scores.relevance import RelevanceGrade
from evret_core.testing.llm_stubs import isolate_llm_env


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_llm_env(monkeypatch, tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


# (prompt, schema or None, max_tokens): prompts of different lengths, free and constrained, different budgets
CALLS: list[tuple[str, Any, int]] = [
    ("Hi.", None, 12),
    ("Grade the passage: the queen lays two thousand eggs a day in spring, and the workers feed her.",
     RelevanceGrade.model_json_schema(), 40),
    ("Which claims does the passage support?", GeneratedAnswer.model_json_schema(), 48),
    ("A much longer question about bees, hives, honey, wax, drones, workers and the queen, asked twice over: "
     "bees, hives, honey, wax, drones, workers and the queen?", None, 30),
    ("Short.", with_choices(DirectAnswer, selected_option=["yes", "no", "partly"]).model_json_schema(), 64),
    ("Compare the responses and say which is better.", None, 3),
    ("Grade it.", RelevanceGrade.model_json_schema(), 40),
    ("One more free answer, of a middling length.", None, 20),
]


def ask_all(provider: TransformersProvider) -> list[tuple[str, int, int]]:
    async def run() -> list[tuple[str, int, int]]:
        answers = await asyncio.gather(*(provider.acomplete([ChatMessage("user", prompt)], max_tokens=budget,
                                                            json_schema=schema) for prompt, schema, budget in CALLS))
        return [(a.text, a.input_tokens, a.output_tokens) for a in answers]

    return asyncio.run(run())


@pytest.mark.parametrize("chat", [False, True])
def test_a_batch_of_mixed_calls_gives_each_the_tokens_it_gets_alone(tiny_model: Path, tiny_chat_model: Path,
                                                                      chat: bool) -> None:
    model = str(tiny_chat_model if chat else tiny_model)
    alone = TransformersProvider(model, max_new_tokens=64, max_batch=1)
    together = TransformersProvider(model, max_new_tokens=64, max_batch=8, batch_window_ms=2000)
    assert together.max_concurrency == 8 and alone.max_concurrency == 1
    one_at_a_time = ask_all(alone)
    batched = ask_all(together)
    batcher = together._loaded.batcher
    assert list(batcher.sizes)[-1] == 8  # the eight calls ran as one batch
    assert batched == one_at_a_time
    assert len({text for text, _, _ in batched}) > 4  # the rows did not all say the same thing
    assert [used_out for _, _, used_out in batched][5] <= 3  # each row kept its own budget


class CancelAfter(threading.Event):
    """A cancel flag that sets itself the ``n``-th time it is read: a cancellation at a known token."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.reads = 0
        self.n = n

    def is_set(self) -> bool:
        self.reads += 1
        if self.reads >= self.n:
            self.set()
        return super().is_set()


def test_a_call_cancelled_mid_batch_drops_only_its_row(tiny_model: Path) -> None:
    provider = TransformersProvider(str(tiny_model), max_new_tokens=64)
    asyncio.run(provider.warmup())
    loaded = provider._loaded

    def call(prompt: str, cancel: threading.Event | None = None) -> runtime.Call:
        return runtime.Call(messages=[ChatMessage("user", prompt)], temperature=0.0, max_new_tokens=48, seed=0,
                            json_schema=GeneratedAnswer.model_json_schema() if "JSON" in prompt else None,
                            cancel=cancel or threading.Event())

    prompts = ["Say something.", "Answer in JSON, please.", "A third, longer prompt than the others here.",
               "JSON again."]
    alone = [runtime.submit(loaded, call(p), max_batch=1, window=0).result() for p in prompts]
    cancel = CancelAfter(4)  # read before the batch (1), then after each token: cancelled after its 3rd token
    futures = [runtime.submit(loaded, call(p, cancel if i == 2 else None), max_batch=4, window=2.0)
               for i, p in enumerate(prompts)]
    with pytest.raises(Exception, match="cancelled") as caught:
        futures[2].result()
    assert getattr(caught.value, "kind", None) == "timeout"
    assert cancel.reads == 4
    assert [f.result() for i, f in enumerate(futures) if i != 2] == [a for i, a in enumerate(alone) if i != 2]
    assert list(loaded.batcher.sizes)[-1] == 4


def test_a_call_that_cannot_run_fails_alone(tiny_model: Path) -> None:
    """A prompt beyond the context in a batch: that call fails in one line, the others are answered."""
    provider = TransformersProvider(str(tiny_model), max_new_tokens=16, max_batch=4, batch_window_ms=2000)

    async def run() -> Any:
        return await asyncio.gather(provider.acomplete([ChatMessage("user", "Hi.")]),
                                    provider.acomplete([ChatMessage("user", "word " * 5000)]),
                                    provider.acomplete([ChatMessage("user", "Hello.")]),
                                    return_exceptions=True)

    first, long, third = asyncio.run(run())
    assert "exceeds the model's context" in str(long)
    assert first.output_tokens >= 1 and third.output_tokens >= 1


@pytest.mark.parametrize(("option", "value"), [("max_batch", 0), ("max_batch", 2.5), ("batch_window_ms", -1),
                                               ("batch_window_ms", "soon")])
def test_bad_batch_options_are_refused(tiny_model: Path, option: str, value: Any) -> None:
    with pytest.raises(EvretError, match=f"option '{option}'"):
        TransformersProvider(str(tiny_model), **{option: value})


def test_jump_forward_gives_the_answers_of_token_by_token_decoding_in_fewer_passes(tiny_model: Path,
                                                                                   tiny_chat_model: Path) -> None:
    """The text a schema forces (``{"grade":``...) is fed in one pass and checked against the token-by-token
    choice: every project schema, greedy and sampled, alone and in a batch, gives the same answers as without
    jump-forward; the verdicts take fewer forward passes."""
    from evret_core.criteria.pairwise import PairwiseAnswer
    from evret_core.rag.claims.llm_judge import ClaimCheck, ExtractedClaims
    from evret_core.scoring.llm_score import ScoreAnswer

    schemas: list[Any] = [RelevanceGrade, GeneratedAnswer, ExtractedClaims, ClaimCheck, ScoreAnswer, DirectAnswer,
               PairwiseAnswer]
    prompts = ["Grade the answer: the queen lays two thousand eggs.", "Which claims does the passage support?"]
    for folder, temperatures in ((tiny_model, (0.0, 1.0)), (tiny_chat_model, (0.0,))):
        loaded = runtime.load(str(folder.resolve()), "auto", "auto")

        def run(jump: bool, batch: int, temperature: float, schema: Any,
                loaded: runtime.Loaded = loaded) -> tuple[list[Any], int]:
            before = loaded.forwards
            calls = [runtime.Call(messages=[ChatMessage("user", p)], temperature=temperature, max_new_tokens=96,
                                  seed=i, json_schema=schema, jump_forward=jump) for i, p in enumerate(prompts)]
            futures = [runtime.submit(loaded, c, max_batch=batch, window=1.0 if batch > 1 else 0) for c in calls]
            return [f.result() for f in futures], loaded.forwards - before

        for model in schemas:
            schema = model.model_json_schema()
            for temperature in temperatures:
                plain, plain_passes = run(False, 1, temperature, schema)
                jumped, passes = run(True, 1, temperature, schema)
                assert jumped == plain, (model.__name__, temperature)
                assert passes <= plain_passes
                assert run(True, 2, temperature, schema)[0] == plain, (model.__name__, temperature, "batched")
        verdicts, passes = run(True, 1, 0.0, RelevanceGrade.model_json_schema())
        plain, plain_passes = run(False, 1, 0.0, RelevanceGrade.model_json_schema())
        assert verdicts == plain and passes < plain_passes
