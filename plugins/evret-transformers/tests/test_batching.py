"""Batched generation on a tiny random Llama: calls that arrive together run as one left-padded batch, and each
call's answer is the one it gets alone (greedy: the same tokens), free or under a schema, whatever its prompt
length, budget or stop; a call cancelled mid-batch leaves only its row; the prompts' common prefix is prefilled
once."""

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


SYSTEM = "You are a strict relevance judge. Answer with exactly one word, YES or NO. " * 3
SHARED_USERS = ["Query: bees?", "Query: how many eggs does a queen bee lay? Expected answer: two thousand.", "Hi.",
                "The claim is supported by the context. The answer is refused when the context is missing."]


def shared_calls(share: bool, temperature: float = 0.0) -> list[runtime.Call]:
    """Four calls whose prompts start with one long system message: free and constrained, own seeds."""
    schema = RelevanceGrade.model_json_schema()
    return [runtime.Call(messages=[ChatMessage("system", SYSTEM), ChatMessage("user", user)], temperature=temperature,
                         max_new_tokens=40, seed=i, json_schema=schema if i % 2 else None, share_prefix=share)
            for i, user in enumerate(SHARED_USERS)]


@pytest.mark.parametrize("chat", [False, True])
def test_a_batch_prefills_its_common_prefix_once_and_each_call_gets_its_answer_alone(
        tiny_model: Path, tiny_chat_model: Path, chat: bool) -> None:
    """The system message every prompt starts with is prefilled once and its cache copied to the four rows: the
    rows are fed a third fewer token positions, and each answer (greedy and sampled, free and under a schema) is
    the one the call gets alone, as it is with sharing off."""
    loaded = runtime.load(str((tiny_chat_model if chat else tiny_model).resolve()), "auto", "auto")
    prompts = [runtime.prompt_ids(loaded.tokenizer, call.messages) for call in shared_calls(True)]
    common = next(i for i in range(len(prompts[0])) if len({p[i] for p in prompts}) > 1)
    assert common >= runtime.MIN_SHARED
    for temperature in (0.0, 1.0):
        alone = [runtime.submit(loaded, call, max_batch=1, window=0).result()
                 for call in shared_calls(True, temperature)]
        fed: dict[bool, int] = {}
        for share in (True, False):
            fed_before, shared_before = loaded.fed, loaded.shared
            futures = [runtime.submit(loaded, call, max_batch=4, window=2.0)
                       for call in shared_calls(share, temperature)]
            assert [f.result() for f in futures] == alone, (share, temperature)
            assert list(loaded.batcher.sizes)[-1] == 4
            fed[share] = loaded.fed - fed_before
            assert loaded.shared - shared_before == (3 * common if share else 0)
        assert fed[True] <= fed[False] - 3 * common  # the prefix fed once, not four times (padding may differ)


def _rows(*prompts: list[int], share: bool = True, budget: int = 8) -> list[runtime._Row]:
    from concurrent.futures import Future

    return [runtime._Row(runtime._Queued(runtime.Call(messages=[], temperature=0.0, max_new_tokens=budget, seed=0,
                                                      share_prefix=share), Future(), 4, 0.0), ids, None, None, None)
            for ids in prompts]


def test_the_shared_prefix_is_the_common_tokens_within_the_rules() -> None:
    head = list(range(100, 140))
    assert runtime.shared_prefix(_rows(head + [1, 2], head + [3]), None) == 40
    assert runtime.shared_prefix(_rows(head, head + [3, 4]), None) == 39  # each row keeps a token of its own
    assert runtime.shared_prefix(_rows(head + [1]), None) == 0  # one row: nothing to share
    assert runtime.shared_prefix(_rows(head[:10] + [1], head[:10] + [2]), None) == 0  # below MIN_SHARED
    assert runtime.shared_prefix(_rows(head + [1], head + [2], share=False), None) == 0  # asked not to
    # a sliding window is kept to batches that fit in it with the longest budget and the drafts' room
    assert runtime.shared_prefix(_rows(head + [1], head + [2], budget=8), 41 + 8 + runtime.DRAFT_ROOM + 1) == 40
    assert runtime.shared_prefix(_rows(head + [1], head + [2], budget=8), 41 + 8 + runtime.DRAFT_ROOM) == 0


def test_a_sliding_window_model_shares_a_prefix_within_its_window(tiny_model: Path, tmp_path: Path) -> None:
    """A random Mistral whose layers attend over a sliding window of 256 slots: a batch within it shares its
    prefix and answers as alone; with a window of 64 the same batch does not share and still answers as alone."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    for window, shares in ((256, True), (64, False)):
        folder = sliding_mistral(tiny_model, tmp_path / f"mistral-{window}", window)
        loaded = runtime.load(str(folder), "cpu", "auto")
        calls = shared_calls(True)[:2]
        assert max(len(runtime.prompt_ids(tokenizer, c.messages)) for c in calls) < 256 - 40 - runtime.DRAFT_ROOM
        alone = [runtime.submit(loaded, call, max_batch=1, window=0).result() for call in shared_calls(True)[:2]]
        before = loaded.shared
        futures = [runtime.submit(loaded, call, max_batch=2, window=2.0) for call in shared_calls(True)[:2]]
        assert [f.result() for f in futures] == alone
        assert (loaded.shared > before) is shares


def test_rows_are_grouped_by_length_to_feed_the_fewest_positions() -> None:
    """Sorted by length and split where a group's padding costs more than another group's passes."""
    assert runtime.own_length_groups([10, 200, 12, 190, 11, 400], cost=32) == [[0, 2, 4], [1, 3], [5]]
    assert runtime.own_length_groups([177] * 32, cost=32) == [list(range(32))]  # equal lengths: one group
    assert runtime.own_length_groups([10, 20, 30], cost=1000) == [[0, 1, 2]]  # groups too dear: one group
    assert runtime.own_length_groups([10, 20, 30], cost=0) == [[0], [1], [2]]  # free groups: no padding at all
    assert runtime.own_length_groups([5, 5, 100, 5], cost=32) == [[0, 1, 3], [2]]  # index order kept in a group
    assert runtime.own_length_groups([]) == []
    lengths = [97, 380, 120, 64, 301, 333, 250, 88, 190, 260, 400, 75]
    groups = runtime.own_length_groups(lengths, cost=32)
    assert sorted(i for group in groups for i in group) == list(range(len(lengths)))
    cost = sum(len(group) * max(lengths[i] for i in group) + 32 for group in groups)
    assert cost < len(lengths) * max(lengths) + 32  # fewer positions than one batch padded to the longest


LONG_USERS = ["Hi.", "Yes?", "First long question: " + "how many eggs does a queen bee lay in a day in spring? " * 4,
              "Second long question: " + "how many eggs does a queen bee lay in a day in summer? " * 4]


def sliding_mistral(tokenizer_folder: Path, folder: Path, window: int) -> Path:
    """A random Mistral whose layers attend over a sliding window of ``window`` slots, saved in ``folder``."""
    import torch
    from transformers import AutoTokenizer, MistralConfig, MistralForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_folder)
    torch.manual_seed(0)
    MistralForCausalLM(MistralConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                                     num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                     sliding_window=window, max_position_embeddings=1024, bos_token_id=0,
                                     eos_token_id=1, pad_token_id=2)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.mark.parametrize("kind", ["plain", "chat", "sliding"])
def test_a_batch_of_mixed_lengths_runs_in_groups_and_each_call_gets_its_answer_alone(
        tiny_model: Path, tiny_chat_model: Path, tmp_path: Path, kind: str) -> None:
    """Two short and two long prompts after one shared system message: the short pair and the long pair are
    prefilled as two groups, each padded to its own longest (not the short rows to the longest of the four), with
    the prefix prefilled once; the groups' caches are then joined and decode as one batch (a sliding-window
    Mistral's cache is not joined: its groups decode apart); every answer, free or under a schema, is the one the
    call gets alone."""
    folder = {"plain": tiny_model, "chat": tiny_chat_model}.get(kind) or sliding_mistral(tiny_model, tmp_path, 512)
    loaded = runtime.load(str(folder.resolve()), "auto", "auto")

    def calls(schema: Any) -> list[runtime.Call]:
        return [runtime.Call(messages=[ChatMessage("system", SYSTEM), ChatMessage("user", user)], temperature=0.0,
                             max_new_tokens=24, seed=i, json_schema=schema) for i, user in enumerate(LONG_USERS)]

    prompts = [runtime.prompt_ids(loaded.tokenizer, call.messages) for call in calls(None)]
    common = next(i for i in range(len(prompts[0])) if len({p[i] for p in prompts}) > 1)
    own = [len(p) - common for p in prompts]
    assert runtime.own_length_groups(own) == [[0, 1], [2, 3]]
    for schema in (None, RelevanceGrade.model_json_schema()):
        alone = [runtime.submit(loaded, call, max_batch=1, window=0).result() for call in calls(schema)]
        before, forwards = loaded.prefilled, loaded.forwards
        futures = [runtime.submit(loaded, call, max_batch=4, window=2.0) for call in calls(schema)]
        assert [f.result() for f in futures] == alone, schema
        assert list(loaded.batcher.sizes)[-1] == 4
        if schema is None:  # free text: each group's first pass is its rows' own prompt tokens, left-padded
            grouped = common + 2 * max(own[:2]) + 2 * max(own[2:])
            assert loaded.prefilled - before == grouped < common + 4 * max(own)
            assert [f.result()[2] for f in futures] == [24] * 4  # every row writes its whole budget
            # the prefix, each group's prompt pass, then 23 decoding passes: the groups joined, or apart
            assert loaded.forwards - forwards == 1 + 2 + (2 * 23 if kind == "sliding" else 23)


def test_on_a_sliding_window_the_rows_that_fit_share_the_prefix_and_the_others_do_not(tiny_model: Path,
                                                                                      tmp_path: Path) -> None:
    """A window that holds the two short prompts with their budget and drafts but not the two long ones: the short
    pair shares the system message (fed once for two rows), the long pair is grouped without it, and every answer
    is the one the call gets alone."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    calls = [runtime.Call(messages=[ChatMessage("system", SYSTEM), ChatMessage("user", user)], temperature=0.0,
                          max_new_tokens=24, seed=i, json_schema=RelevanceGrade.model_json_schema() if i % 2 else None)
             for i, user in enumerate(LONG_USERS)]
    prompts = [runtime.prompt_ids(tokenizer, call.messages) for call in calls]
    window = max(map(len, prompts[:2])) + 24 + runtime.DRAFT_ROOM + 1
    assert min(map(len, prompts[2:])) + 24 + runtime.DRAFT_ROOM >= window  # the long pair does not fit
    common = next(i for i in range(len(prompts[0])) if prompts[0][i] != prompts[1][i])
    loaded = runtime.load(str(sliding_mistral(tiny_model, tmp_path / "mistral", window)), "cpu", "auto")
    alone = [runtime.submit(loaded, call, max_batch=1, window=0).result() for call in calls]
    before = loaded.shared
    futures = [runtime.submit(loaded, call, max_batch=4, window=2.0) for call in calls]
    assert [f.result() for f in futures] == alone
    assert list(loaded.batcher.sizes)[-1] == 4
    assert loaded.shared - before == common  # the prefix fed once for the two short rows, not at all for the long


def test_attention_reads_the_grouped_key_value_heads_without_copying_them(tiny_model: Path) -> None:
    """On CPU under SDPA the model's attention passes the key/value heads (2 for 4 query heads here) to the kernel
    grouped, not copied to each query head: the output is transformers' own SDPA's, with a padding mask (a batch's
    pass) and without (causal), and a single query position goes to transformers' own."""
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    key = (str(tiny_model.resolve()), "cpu", "auto")
    kept = key in runtime._LOADED
    loaded = runtime.load(*key)
    if not kept:  # a load of its own under its own key: other tests count the loads of this model
        runtime._LOADED.pop(key)
    assert loaded.model.config._attn_implementation == runtime.GROUPED
    module = loaded.model.model.layers[0].self_attn
    assert module.num_key_value_groups == 2
    generator = torch.Generator().manual_seed(0)
    for length, slots in ((5, 9), (5, 5), (1, 9)):
        query = torch.randn(3, 4, length, 8, generator=generator)
        key, value = (torch.randn(3, 2, slots, 8, generator=generator) for _ in range(2))
        mask = torch.ones(3, 1, length, slots, dtype=torch.bool).tril(slots - length)
        mask[1, :, :, :2] = False  # a left-padded row
        for given in (mask, None) if length == slots else (mask,):
            ours, _ = runtime.grouped_sdpa(module, query, key, value, given, scaling=0.3)
            theirs, _ = sdpa_attention_forward(module, query, key, value, given, scaling=0.3)
            assert ours.shape == theirs.shape == (3, length, 4, 8)
            assert torch.allclose(ours, theirs, atol=1e-6), (length, slots, given is None)
