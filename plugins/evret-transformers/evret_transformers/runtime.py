"""Loading a model once per process, building prompts, and the generation loop (free or constrained, batched).

Imported by the provider when it warms up, never at plugin load: this module imports torch and transformers.
The generation loop is Evret's own (a KV-cached forward per step, asking for the scores of the positions whose next
token is chosen only, when the model's forward takes ``logits_to_keep``). Calls go through one queue per loaded
model (:func:`submit`); a thread of its own takes the calls that arrived together as one batch
(:func:`generate_many`: left-padded, an attention mask and per-row positions, each row its own grammar state,
budget and stop; the prompts' common token prefix prefilled once and its cache copied to every row; the rows run
in groups of similar length, so a short prompt is not padded to the batch's longest). Under a JSON schema each step
keeps only the tokens :class:`~evret_transformers.tokens.TokenConstraint` allows and, of those, the ones after
which the JSON can still be closed within the tokens left, so the answer is complete JSON even when the budget runs
out; the text the grammar forces is fed in one pass and checked token by token (jump-forward). The answer's text
is the concatenation of the chosen tokens' strings, the very text the grammar accepted."""

from __future__ import annotations

import atexit
import contextlib
import copy
import json
import os
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from evret_core.sdk import ChatMessage, LLMCallError, quiet_model_loading
from evret_transformers.grammar import JsonGrammar, SchemaNotSupported
from evret_transformers.tokens import TokenConstraint, TokenIndex

PLAIN_ROLES = {"system": "System", "user": "User", "assistant": "Assistant"}


@dataclass
class Call:
    """One completion request, as the provider hands it to :func:`complete`."""

    messages: list[ChatMessage]
    temperature: float
    max_new_tokens: int
    seed: int
    json_schema: Mapping[str, Any] | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    threads: int | None = None
    jump_forward: bool = True  # feed the text the grammar forces in one forward pass (see generate_many)
    share_prefix: bool = True  # in a batch, prefill the prompts' common token prefix once (see generate_many)
    timeout: float | None = None  # seconds from when its batch starts (the wait for earlier batches not counted)


@dataclass
class Loaded:
    """A model, its tokenizer and what was derived from them; ``lock`` lets one call use the model at a time."""

    model: Any
    tokenizer: Any
    device: str
    lock: threading.Lock = field(default_factory=threading.Lock)
    index: TokenIndex | None = None
    constraints: dict[str, TokenConstraint] = field(default_factory=dict)
    masks: dict[tuple[int, Any], tuple[Any, Any, int]] = field(default_factory=dict)
    drafts: dict[tuple[int, Any], list[int]] = field(default_factory=dict)
    forwards: int = 0  # forward passes run (tests and the benchmark read it)
    fed: int = 0  # token positions fed to the model, padding included (tests and the benchmark read it)
    shared: int = 0  # prompt tokens not fed because a batch's common prefix was prefilled once
    prefilled: int = 0  # token positions fed by the prompts' passes (shared prefix, each group's first), padding in
    eos: frozenset[int] = frozenset()
    cache_argument: str = "cache"  # transformers 5 names the KV cache `cache`, earlier releases `past_key_values`
    last_logits: bool = False  # the forward takes `logits_to_keep`: the lm_head runs on the last position only
    batcher: Batcher = field(default_factory=lambda: Batcher())
    strings_file: Path | None = None  # where the token strings are kept between processes (GGUF conversions)


@dataclass
class Batcher:
    """The calls waiting for this model (:func:`submit`) and whether a thread is serving them."""

    queue: deque[_Queued] = field(default_factory=deque)
    ready: threading.Condition = field(default_factory=threading.Condition)
    running: bool = False
    sizes: deque[int] = field(default_factory=lambda: deque(maxlen=256))  # the last batches' sizes, as run
    thread: threading.Thread | None = None  # the thread serving the queue, while ``running``
    current: list[_Queued] = field(default_factory=list)  # the calls of the batch it runs now


#: the batchers that ever started a thread, so that :func:`_stop_batchers` can end them at exit
_BATCHERS: list[Batcher] = []
#: the batcher threads started and perhaps still alive: a thread that has left its queue (``batcher.thread`` is
#: None again) still drops its reference to the model as it ends, and the last reference frees the model in it
_THREADS: list[threading.Thread] = []
#: how long the interpreter waits at exit for a batch still running (its calls are cancelled first)
EXIT_WAIT = 60.0


def _stop_batchers() -> None:
    """At interpreter exit, before daemon threads are frozen: cancel every queued and running call and wait for
    each batcher thread to end. A daemon thread still inside torch when Python 3.11 finalizes is ended by
    ``pthread_exit`` through C++ frames that cannot unwind, and the process aborts ("terminate called without an
    active exception") after its work is done; a cancelled batch ends at its next step. Every thread still alive is
    waited for, also one that has left its queue: as it ends it drops its reference to the model, and when that is
    the last one (the process let go of the model) torch frees it in that thread."""
    for batcher in list(_BATCHERS):
        with batcher.ready:
            for queued in [*batcher.queue, *batcher.current]:
                queued.call.cancel.set()
    for thread in list(_THREADS):
        if thread is not threading.current_thread():
            thread.join(EXIT_WAIT)


atexit.register(_stop_batchers)


_LOADED: dict[tuple[str, str, str], Loaded] = {}
_LOADING = threading.Lock()


def resolve_device(device: str) -> str:
    if device != "auto":
        return device
    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    return "mps" if mps is not None and mps.is_available() else "cpu"


def resolve_dtype(dtype: str, device: str) -> Any:
    if dtype != "auto":
        return getattr(torch, dtype)
    if device.startswith("cuda"):
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.float16 if device == "mps" else torch.float32


def load(source: str, device: str, dtype: str, strings_file: Path | None = None) -> Loaded:
    """The model of ``source`` on ``device``, loaded on first use and kept for the process; ``strings_file`` is
    where its token strings are saved once decoded (:func:`saved_token_strings`)."""
    key = (source, device, dtype)
    with _LOADING:
        loaded = _LOADED.get(key)
        if loaded is None:
            from transformers import AutoModelForCausalLM, AutoTokenizer

            where = resolve_device(device)
            with quiet_model_loading():  # transformers' "Loading weights" bar would break Evret's progress line
                tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=True)
                model: Any = AutoModelForCausalLM.from_pretrained(source, local_files_only=True,
                                                                  dtype=resolve_dtype(dtype, where))
            model.to(where)
            model.eval()
            _grouped_attention(model)
            import inspect

            parameters = inspect.signature(model.forward).parameters
            loaded = _LOADED[key] = Loaded(model, tokenizer, where, eos=_eos_ids(model, tokenizer),
                                           cache_argument="cache" if "cache" in parameters else "past_key_values",
                                           last_logits="logits_to_keep" in parameters)
        if strings_file is not None and loaded.strings_file is None:
            loaded.strings_file = strings_file
        return loaded


#: the attention function :func:`_grouped_attention` registers: SDPA, key/value heads passed as they are
GROUPED = "evret_sdpa_grouped"


def _grouped_attention(model: Any) -> None:
    """On a CPU model under SDPA, attention over the key/value heads as they are (``enable_gqa``) instead of a copy
    of each repeated to its query heads: transformers copies them whenever a mask is given (every pass of a batch,
    and of one call under jump-forward), a copy of the whole cache per layer; the kernel reads the heads grouped.
    The scores are the same kernel's on the same numbers. Other devices and implementations are left as they are
    (on CUDA, a mask with grouped heads falls back to the math kernel)."""
    config = getattr(model, "config", None)
    if getattr(config, "_attn_implementation", None) != "sdpa" or str(model.device) != "cpu":
        return
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    AttentionInterface.register(GROUPED, grouped_sdpa)
    ALL_MASK_ATTENTION_FUNCTIONS.register(GROUPED, sdpa_mask)
    model.set_attn_implementation(GROUPED)


def grouped_sdpa(module: Any, query: Any, key: Any, value: Any, attention_mask: Any, dropout: float = 0.0,
                 scaling: float | None = None, is_causal: bool | None = None, **kwargs: Any) -> tuple[Any, None]:
    """transformers' SDPA attention, the key/value heads grouped in the kernel (``enable_gqa``) rather than copied;
    a single query position, a position bias and a model without grouped heads go to transformers' own."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    length = query.shape[2]
    if (getattr(module, "num_key_value_groups", 1) <= 1 or length == 1 or kwargs.get("position_bias") is not None
            or kwargs.get("softcap") is not None or kwargs.get("output_attentions", False)):
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    causal = attention_mask is None and causal
    if causal and key.shape[2] > length:  # an empty static cache's prefill: the first slots are the prompt's
        key, value = key[:, :, :length, :], value[:, :, :length, :]
    output = torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask,
                                                              dropout_p=dropout, scale=scaling, is_causal=causal,
                                                              enable_gqa=True)
    return output.transpose(1, 2).contiguous(), None


def _eos_ids(model: Any, tokenizer: Any) -> frozenset[int]:
    ids: set[int] = set()
    for value in (getattr(model.generation_config, "eos_token_id", None), tokenizer.eos_token_id):
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(int(v) for v in value)
    return frozenset(ids)


def token_strings(tokenizer: Any) -> list[str | None]:
    """Each token's text as it reads after other text (a SentencePiece ``▁the`` is `` the``), or None for special
    tokens. Decoded after a reference token and cut, since many tokenizers drop a leading space when a token
    is decoded alone."""
    size = len(tokenizer)
    special = set(tokenizer.all_special_ids)
    reference = tokenizer.convert_tokens_to_ids(tokenizer.tokenize("a"))[:1] or [0]
    base = tokenizer.decode(reference)
    decoded = tokenizer.batch_decode([reference + [i] for i in range(size)])
    return [None if i in special or not text.startswith(base) else text[len(base):] or None
            for i, text in enumerate(decoded)]


def saved_token_strings(tokenizer: Any, path: Path | None) -> list[str | None]:
    """:func:`token_strings`, read from ``path`` when a previous process saved them there (a JSON list of one
    string or null per token, checked against the tokenizer's size), else decoded and saved there (a temporary
    file renamed: no reader sees half of it). Decoding Gemma 3's 262,144 tokens takes seconds; reading them back
    a fraction of one."""
    size = len(tokenizer)
    if path is not None:
        try:
            kept = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            kept = None  # not saved yet, or unreadable: decoded again and saved over
        if isinstance(kept, list) and len(kept) == size and all(s is None or isinstance(s, str) for s in kept):
            return kept
    strings = token_strings(tokenizer)
    if path is not None:
        temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
        try:
            temporary.write_text(json.dumps(strings, ensure_ascii=True), encoding="utf-8")
            os.replace(temporary, path)
        except OSError:  # a read-only cache: the strings are decoded again next time
            with contextlib.suppress(OSError):
                temporary.unlink()
    return strings


def constraint(loaded: Loaded, schema: Mapping[str, Any]) -> TokenConstraint:
    """The token constraint of ``schema`` on this model's vocabulary, built once per schema."""
    key = json.dumps(schema, sort_keys=True)
    found = loaded.constraints.get(key)
    if found is None:
        if loaded.index is None:
            loaded.index = TokenIndex(saved_token_strings(loaded.tokenizer, loaded.strings_file))
        try:
            grammar = JsonGrammar(schema, literal_cost=loaded.index.spell_cost)
        except SchemaNotSupported as exc:
            raise LLMCallError(f"transformers: the JSON schema cannot be decoded under constraint: {exc}",
                               retryable=False) from None
        found = loaded.constraints[key] = TokenConstraint(grammar, loaded.index)
    return found


def prompt_ids(tokenizer: Any, messages: Sequence[ChatMessage]) -> list[int]:
    """The prompt's token ids: the tokenizer's chat template when it has one, else the plain format
    (``System: ...``, ``User: ...`` blocks, each followed by a blank line, then ``Assistant:``)."""
    chat = [{"role": m.role, "content": m.content} for m in messages]
    if getattr(tokenizer, "chat_template", None):
        try:
            text = tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
        except Exception:  # templates that refuse a system role (Gemma's...): fold it into the first user turn
            text = tokenizer.apply_chat_template(_fold_system(chat), tokenize=False, add_generation_prompt=True)
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])
    return list(tokenizer(plain_prompt(messages))["input_ids"])


def plain_prompt(messages: Sequence[ChatMessage]) -> str:
    """The prompt of a tokenizer without a chat template."""
    blocks = [f"{PLAIN_ROLES.get(m.role, m.role.title())}: {m.content}" for m in messages]
    return "\n\n".join(blocks + ["Assistant:"])


def _fold_system(chat: list[dict[str, str]]) -> list[dict[str, str]]:
    system = "\n\n".join(m["content"] for m in chat if m["role"] == "system")
    rest = [dict(m) for m in chat if m["role"] != "system"]
    if system and rest and rest[0]["role"] == "user":
        rest[0]["content"] = f"{system}\n\n{rest[0]['content']}"
    return rest


def complete(source: str, device: str, dtype: str, call: Call) -> tuple[str, int, int]:
    """``(text, prompt tokens, answer tokens)`` for one call, run alone (a batch of one); blocks until done."""
    return submit(load(source, device, dtype), call, max_batch=1, window=0.0).result()


def submit(loaded: Loaded, call: Call, max_batch: int, window: float) -> Future[tuple[str, int, int]]:
    """Queue ``call`` on the model's batcher: calls queued within ``window`` seconds of the first waiting one, up
    to ``max_batch`` (the first one's), run as one batched generation; the call's ``timeout`` counts from when its
    batch starts. The future holds ``(text, prompt tokens, answer tokens)`` or the call's :class:`LLMCallError`,
    always: nothing leaves it waiting."""
    future: Future[tuple[str, int, int]] = Future()
    batcher = loaded.batcher
    with batcher.ready:
        batcher.queue.append(_Queued(call, future, max(1, max_batch), max(0.0, window)))
        batcher.ready.notify_all()
        if not batcher.running:
            batcher.running = True
            if batcher not in _BATCHERS:
                _BATCHERS.append(batcher)
            batcher.thread = threading.Thread(target=_serve, args=(loaded,), name="evret-transformers-batch",
                                              daemon=True)
            _THREADS[:] = [t for t in _THREADS if t.is_alive()] + [batcher.thread]
            try:
                batcher.thread.start()
            except BaseException as exc:  # no thread ("can't start new thread"): nothing would ever serve the
                # queue, and every later call would wait behind ``running`` for ever
                _abandon(batcher, LLMCallError(f"transformers: cannot start the thread that runs the model: "
                                               f"{type(exc).__name__}: {exc}", retryable=False))
    return future


@dataclass
class _Queued:
    call: Call
    future: Future[tuple[str, int, int]]
    max_batch: int
    window: float
    deadline: float | None = None  # when the call's batch started plus its timeout (time.monotonic)


@dataclass
class _Row:
    """One call of a running batch: its prompt, grammar state, answer so far and sampling generator."""

    queued: _Queued
    ids: list[int]
    rules: TokenConstraint | None
    state: Any
    generator: Any
    out: list[int] = field(default_factory=list)


def _abandon(batcher: Batcher, error: BaseException) -> None:
    """Fail every call queued or running on ``batcher`` with ``error`` and mark it idle (the next call starts a
    thread): what a batcher does when it cannot serve, so that no caller waits for an answer that never comes."""
    with batcher.ready:
        stranded = [*batcher.current, *batcher.queue]
        batcher.queue.clear()
        batcher.current = []
        batcher.running = False
        batcher.thread = None
    for queued in stranded:
        with contextlib.suppress(InvalidStateError):  # answered, or cancelled by its caller, in the meantime
            if not queued.future.done():
                queued.future.set_exception(error)


def _serve(loaded: Loaded) -> None:
    """The batcher's thread: takes batches off the queue until it is empty, then ends (the next call starts
    another). If it fails itself, every call it holds fails with that error (:func:`_abandon`) and it ends: no
    call is left waiting, and the next call starts a new thread."""
    try:
        _serve_queue(loaded)
    except BaseException as exc:  # noqa: BLE001 - the error reaches every caller it concerns
        _abandon(loaded.batcher, LLMCallError(f"transformers: the thread that runs the model failed: "
                                              f"{type(exc).__name__}: {exc}", retryable=False))


def _serve_queue(loaded: Loaded) -> None:
    batcher = loaded.batcher
    while True:
        with batcher.ready:
            if not batcher.queue:
                batcher.running = False
                batcher.thread = None
                batcher.current = []
                return
            first = batcher.queue[0]
            deadline = time.monotonic() + first.window
            while len(batcher.queue) < first.max_batch and (left := deadline - time.monotonic()) > 0:
                batcher.ready.wait(left)
            taken = [batcher.queue.popleft() for _ in range(min(first.max_batch, len(batcher.queue)))]
            batcher.current = taken
        # a call cancelled while queued is dropped; the others cannot be cancelled from here on (the flag is)
        taken = [q for q in taken if q.future.set_running_or_notify_cancel()]
        if taken:
            batcher.sizes.append(len(taken))
            try:
                with loaded.lock:
                    started = time.monotonic()  # each call's timeout counts from here: its own batch's work
                    for queued in taken:
                        if queued.call.timeout is not None:
                            queued.deadline = started + queued.call.timeout
                    _run_batch(loaded, taken)
            except BaseException as exc:  # noqa: BLE001 - a model that cannot run fails every call of the batch
                for queued in taken:
                    if not queued.future.done():
                        queued.future.set_exception(exc)
            for queued in taken:  # every call of the batch leaves it answered or failed, never waiting
                if not queued.future.done():
                    queued.future.set_exception(LLMCallError("transformers: the batch ended without an answer "
                                                             "for this call", retryable=False))


def _run_batch(loaded: Loaded, taken: list[_Queued]) -> None:
    """Check each call (a call that cannot run fails alone), generate the rest as one batch, set the futures."""
    threads = next((q.call.threads for q in taken if q.call.threads is not None), None)
    if threads is not None and torch.get_num_threads() != threads:
        torch.set_num_threads(threads)  # a worker thread that ran torch before keeps its own count
    rows: list[_Row] = []
    for queued in taken:
        try:
            rows.append(_prepare(loaded, queued))
        except LLMCallError as exc:
            queued.future.set_exception(exc)
        except Exception as exc:  # a call that cannot be prepared (its schema, its messages) fails alone
            queued.future.set_exception(LLMCallError(f"transformers: this call cannot run: {type(exc).__name__}: "
                                                     f"{exc}", retryable=False))
    if rows:
        generate_many(loaded, rows)


def _prepare(loaded: Loaded, queued: _Queued) -> _Row:
    call = queued.call
    if call.cancel.is_set():
        raise _cancelled()
    rules = constraint(loaded, call.json_schema) if call.json_schema is not None else None
    ids = prompt_ids(loaded.tokenizer, call.messages)
    limit = getattr(loaded.model.config, "max_position_embeddings", None)
    if isinstance(limit, int) and len(ids) + call.max_new_tokens > limit:
        raise LLMCallError(f"transformers: a prompt of {len(ids)} tokens plus max_new_tokens="
                           f"{call.max_new_tokens} exceeds the model's context of {limit} tokens",
                           retryable=False)
    state = rules.grammar.initial() if rules is not None else None
    if rules is not None and rules.grammar.cost(state) > call.max_new_tokens:  # type: ignore[arg-type]
        raise LLMCallError(f"transformers: max_new_tokens={call.max_new_tokens} is too few for the shortest JSON "
                           f"of the schema ({rules.grammar.cost(state)} tokens); raise the provider option "  # type: ignore[arg-type]
                           f"max_new_tokens (or the caller's max_tokens)", retryable=False)
    return _Row(queued, ids, rules, state, torch.Generator(device="cpu").manual_seed(call.seed))


def _cancelled() -> LLMCallError:
    return LLMCallError("transformers: cancelled (timeout)", retryable=True, kind="timeout")


def _timed_out(call: Call) -> LLMCallError:
    """The error of a call whose own generation ran past its timeout: not retried, since the same work on the same
    machine would take as long again (and hold the model from the calls behind it)."""
    return LLMCallError(f"transformers: no answer within {call.timeout:g} s of its own generation (counted from "
                        f"when its batch started; the wait for the model is not counted): not retried, the same "
                        f"work would take as long again; raise the LLM option timeout (or lower max_new_tokens)",
                        retryable=False, kind="timeout")


def generate_many(loaded: Loaded, rows: list[_Row]) -> None:
    """Generate every row's answer in one batch and set its future.

    When the rows' prompts start with the same tokens (a judge's system message and instructions: see
    :func:`shared_prefix`), those are prefilled once, as a batch of one. The rows are then split into groups of
    similar own length (the tokens after the shared prefix: :func:`own_length_groups`), so that a short prompt is
    not padded to the longest of the whole batch: each group gets a copy of the prefix's cache, one per row, and
    its prompt pass of its own. On a model with sliding-window layers, only the rows whose prompt, budget and
    drafts fit in the window share the prefix; the others are grouped by their whole prompt's length. The groups'
    caches are then joined into one batch (:func:`_join`: each group's slots left-padded to the widest, the
    padding masked), which decodes the rest in one pass a step; a cache whose layers keep more than keys and
    values (sliding windows) is not joined, and its groups decode apart."""
    window = getattr(loaded.model.config.get_text_config(), "sliding_window", None)
    with torch.inference_mode():
        # on a sliding window, the rows that fit in it share their prefix; the others are grouped without it
        fit = [row for row in rows if window is None or len(row.ids) + row.queued.call.max_new_tokens
               + DRAFT_ROOM < window]
        common = shared_prefix(fit, window)
        sharing = fit if common else []
        rest = [row for row in rows if not any(row is other for other in sharing)]
        prefix = None
        if common:
            result = loaded.model(input_ids=torch.tensor([sharing[0].ids[:common]], device=loaded.device),
                                  use_cache=True, **{loaded.cache_argument: None},
                                  **({"logits_to_keep": 1} if loaded.last_logits else {}))
            loaded.forwards += 1
            loaded.fed += common
            loaded.prefilled += common
            loaded.shared += common * (len(sharing) - 1)
            prefix = getattr(result, loaded.cache_argument)
        groups = [[sharing[i] for i in group] for group in own_length_groups([len(r.ids) - common for r in sharing])]
        last = len(groups) - 1
        groups += [[rest[i] for i in group] for group in own_length_groups([len(row.ids) for row in rest])]
        batches: list[_Batch] = []
        for number, group in enumerate(groups):
            past = None
            if prefix is not None and number <= last:  # the last sharing group takes the prefix's cache itself
                past = prefix if number == last else copy.deepcopy(prefix)
                if not _repeat_rows(past, len(group)):  # pragma: no cover - every cache of transformers 5 can
                    past = None
            batch = _Batch(loaded, group, past, common if past is not None else 0)
            _step(loaded, batch, window)  # the group's prompt pass
            loaded.prefilled += batch.fed
            if batch.live:
                batches.append(batch)
        if len(batches) > 1 and all(_joinable(batch.past) for batch in batches):
            batches = [_join(batches)]
        for batch in batches:
            while batch.live:
                _step(loaded, batch, window)


#: what one more group costs, in token positions fed: its prompt pass's fixed work (30 layers' kernel launches
#: and Python) and the copy of the prefix's cache (a pass of 1-3 tokens costs as much as ~35 positions on SmolLM2)
GROUP_COST = 32


def own_length_groups(lengths: Sequence[int], cost: int = GROUP_COST) -> list[list[int]]:
    """The rows (their indices) split into groups of similar length, each group to be padded to its longest:
    the split of the rows sorted by length that feeds the fewest positions, counting ``cost`` positions for each
    group (``len(group) * longest + cost`` summed; an exact dynamic programme over the sorted lengths). Groups are
    listed shortest first; a row's index order is kept within its group."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    size = len(order)
    best = [0] + [0] * size  # best[k]: the least cost of the first k sorted rows
    cut = [0] * (size + 1)  # cut[k]: where the last group of that best split starts
    for end in range(1, size + 1):
        longest = lengths[order[end - 1]]
        best[end], cut[end] = min((best[start] + (end - start) * longest + cost, start) for start in range(end))
    groups: list[list[int]] = []
    end = size
    while end > 0:
        groups.append(sorted(order[cut[end]:end]))
        end = cut[end]
    return groups[::-1]


class _Batch:
    """Rows generated together: the live rows, their cache (``past``), what each is fed next and from which
    position, the drafts fed last step, and the attention mask over the cache (None while not ``masked``)."""

    def __init__(self, loaded: Loaded, rows: list[_Row], past: Any, common: int) -> None:
        self.live = list(rows)
        self.past = past
        self.jump = any(row.rules is not None and row.queued.call.jump_forward for row in rows)
        # one row without drafts runs as before batching: no mask, positions implied by the cache
        self.masked = len(rows) > 1 or self.jump
        self.mask: Any = (torch.ones((len(rows), common), dtype=torch.long, device=loaded.device)
                          if common and self.masked else None)
        self.feeds = [list(row.ids[common:]) for row in rows]  # what each row is fed next step
        self.starts = [common] * len(rows)  # each row's position of its first fed token
        self.drafts: list[list[int]] = [[] for _ in rows]
        self.fed = 0  # token positions fed by the last step


def _joinable(past: Any) -> bool:
    """Whether the cache's layers hold nothing but keys and values (not a sliding window's slot count)."""
    from transformers.cache_utils import DynamicCache, DynamicLayer

    return type(past) is DynamicCache and all(type(layer) is DynamicLayer for layer in past.layers)


def _join(batches: list[_Batch]) -> _Batch:
    """One batch of the groups' rows: each group's cache slots and mask left-padded (masked) to the widest."""
    sizes = [batch.past.layers[0].keys.shape[-2] for batch in batches]
    width = max(sizes)
    joined = batches[0]
    masks = []
    for batch, size in zip(batches, sizes, strict=True):
        mask = batch.mask if batch.mask is not None else torch.ones((len(batch.live), size), dtype=torch.long,
                                                                       device=batch.past.layers[0].keys.device)
        masks.append(torch.nn.functional.pad(mask, (width - size, 0)))
    for number, layer in enumerate(joined.past.layers):
        for name in ("keys", "values"):
            setattr(layer, name, torch.cat([torch.nn.functional.pad(getattr(batch.past.layers[number], name),
                                                                     (0, 0, width - size, 0))
                                            for batch, size in zip(batches, sizes, strict=True)]))
    joined.mask = torch.cat(masks)
    joined.masked = True
    joined.jump = any(batch.jump for batch in batches)
    for batch in batches[1:]:
        joined.live += batch.live
        joined.feeds += batch.feeds
        joined.starts += batch.starts
        joined.drafts += batch.drafts
    return joined


def _step(loaded: Loaded, batch: _Batch, window: int | None) -> None:
    """One forward pass of the batch, each row's next token chosen; a row that ends leaves the batch.

    Each row is fed the rest of its prompt after the shared slots (``[prefix][padding][own tokens]``, the padding
    masked, positions counted on from the prefix), so it sees what it would see alone; then its last chosen token
    and, under a schema, the text the grammar forces next (a *draft*: ``{"grade":`` at the start of a verdict,
    spelled in the vocabulary's longest tokens; jump-forward), left-padded to one width, with an attention mask
    over the whole cache and per-row positions, so each row sees only its own tokens at the positions it would
    have alone. The draft is checked as decoding one token at a time would: the row's token is chosen from the
    scores after each fed token, and the draft is kept up to the first token that differs (that chosen token is fed
    next; the refused draft's cache slots are masked), so the answer is the one of token-by-token decoding. A row
    that ends (EOS, JSON complete, budget spent, cancelled) leaves the batch, its cache rows dropped. Greedy at
    temperature 0, else sampled with a generator seeded per call."""
    model = loaded.model
    pad = loaded.tokenizer.pad_token_id
    pad = pad if isinstance(pad, int) else next(iter(loaded.eos), 0)
    live, feeds, starts, drafts = batch.live, batch.feeds, batch.starts, batch.drafts
    if batch.jump:
        cached = 0 if batch.mask is None else batch.mask.shape[1]
        for j, row in enumerate(live):
            drafts[j] = _draft(loaded, row) if row.queued.call.jump_forward else []
            if window is not None and cached + max(len(f) for f in feeds) + len(drafts[j]) > window:
                drafts[j] = []  # a sliding window counts cache slots: keep it to what a row has alone
            feeds[j] = feeds[j] + drafts[j]
    width = max(len(f) for f in feeds)
    step_input = torch.tensor([[pad] * (width - len(f)) + f for f in feeds], device=loaded.device)
    extra: dict[str, Any] = {}
    if loaded.last_logits:  # the scores of the positions whose next token is chosen, no more: the
        extra["logits_to_keep"] = 1 + max(len(d) for d in drafts)  # prefill's lm_head skips the prompt
    if batch.masked:
        step_mask = torch.tensor([[0] * (width - len(f)) + [1] * len(f) for f in feeds], device=loaded.device)
        positions = torch.tensor([[0] * (width - len(f)) + list(range(starts[j], starts[j] + len(f)))
                                  for j, f in enumerate(feeds)], device=loaded.device)
        batch.mask = step_mask if batch.mask is None else torch.cat([batch.mask, step_mask], dim=1)
        extra["attention_mask"], extra["position_ids"] = batch.mask, positions
    result = model(input_ids=step_input, use_cache=True, **{loaded.cache_argument: batch.past}, **extra)
    loaded.forwards += 1
    loaded.fed += step_input.numel()
    batch.fed = step_input.numel()
    batch.past = getattr(result, loaded.cache_argument)
    scores = result.logits.float().cpu()
    keep: list[int] = []
    for j, row in enumerate(live):
        draft = drafts[j]
        token: int | None = None
        taken = 0
        try:
            for k in range(len(draft) + 1):  # the scores after the last fed token but len(draft) - k
                token = _next_token(loaded, row, scores[j, scores.shape[1] - 1 - len(draft) + k])
                if token is None or k == len(draft) or token != draft[k]:
                    break
                taken += 1
        except LLMCallError as exc:
            row.queued.future.set_exception(exc)
            continue
        if token is None:
            continue
        if taken < len(draft):  # the refused draft's slots: masked from now on
            batch.mask[j, batch.mask.shape[1] - (len(draft) - taken):] = 0
        starts[j] += len(feeds[j]) - (len(draft) - taken)
        feeds[j] = [token]
        keep.append(j)
    if len(keep) < len(live):
        if not keep:
            batch.live = []
            return
        if not _drop_rows(batch.past, keep):  # pragma: no cover - every cache of transformers 5 can
            raise LLMCallError("transformers: this model's KV cache cannot drop the rows of finished "
                               "calls; use max_batch=1", retryable=False)
        batch.live = [live[j] for j in keep]
        batch.feeds = [feeds[j] for j in keep]
        batch.starts = [starts[j] for j in keep]
        batch.drafts = [drafts[j] for j in keep]
        if batch.mask is not None:
            batch.mask = batch.mask[keep]


#: the fewest common prompt tokens worth a forward pass of their own (below, the pass costs more than it saves)
MIN_SHARED = 16
#: room kept beyond the prompts when a sliding window is checked: jump-forward drafts (16 tokens at most)
DRAFT_ROOM = 16


def shared_prefix(rows: Sequence[_Row], window: int | None) -> int:
    """How many leading prompt tokens the batch prefills once (0: none): the rows' longest common token
    prefix, less one token when a prompt is all prefix (each row feeds at least one token of its own, whose scores
    choose its first answer token); 0 for one row, for a row that asked not to share, for fewer than
    :data:`MIN_SHARED` tokens, and, on a model with sliding-window layers (Gemma 3), when the prompts and the
    longest budget could outgrow the window: the window counts cache slots, which the shared layout pads
    differently from a row alone, so only a batch that stays within it sees exactly what each row sees alone."""
    if len(rows) < 2 or not all(row.queued.call.share_prefix for row in rows):
        return 0
    first = rows[0].ids
    common = min(len(row.ids) for row in rows) - 1
    for row in rows[1:]:
        ids = row.ids
        for i in range(common):
            if ids[i] != first[i]:
                common = i
                break
    if common < MIN_SHARED:
        return 0
    if window is not None:
        longest = max(len(row.ids) for row in rows) + max(row.queued.call.max_new_tokens for row in rows)
        if longest + DRAFT_ROOM >= window:
            return 0
    return common


def _repeat_rows(past: Any, rows: int) -> bool:
    """Copy the cache of a batch of one to ``rows`` rows, in place; False when the cache cannot."""
    repeat = getattr(past, "batch_repeat_interleave", None)
    if repeat is None:
        return False
    repeat(rows)
    return True


def _draft(loaded: Loaded, row: _Row) -> list[int]:
    """The tokens of the text the grammar forces after the row's state (each next character the only one it
    takes), longest tokens first, at most 16; kept per state."""
    rules = row.rules
    if rules is None:
        return []
    key = (id(rules), row.state)
    found = loaded.drafts.get(key)
    if found is None:
        grammar, state, text = rules.grammar, row.state, ""
        while grammar.cost(state) > 0:
            chars = grammar.next_chars(state)
            if chars is None or len(chars) != 1:
                break
            after = grammar.advance(state, next(iter(chars)))
            if not after:
                break
            text, state = text + next(iter(chars)), after
        if len(loaded.drafts) >= 4096:
            loaded.drafts.clear()
        found = loaded.drafts[key] = rules.index.spell(text, 16)
    return found


def _drop_rows(past: Any, keep: list[int]) -> bool:
    select = getattr(past, "batch_select_indices", None)
    if select is None:
        return False
    select(torch.tensor(keep, dtype=torch.long))
    return True


def _next_token(loaded: Loaded, row: _Row, logits: Any) -> int | None:
    """The row's next token, or None when the row has ended (its future then holds the answer or the error)."""
    call, rules = row.queued.call, row.rules
    if call.cancel.is_set():
        raise _cancelled()
    if row.queued.deadline is not None and time.monotonic() > row.queued.deadline:
        raise _timed_out(call)  # the row leaves the batch; the other rows go on
    if rules is None:
        token = _pick(logits, call.temperature, row.generator)
        if token in loaded.eos:
            _finish(loaded, row)
            return None
        row.out.append(token)
    else:
        index = _allowed(loaded, rules, row.state, call.max_new_tokens - len(row.out) - 1)
        if index.numel() == 0:
            raise LLMCallError("transformers: no token of the vocabulary continues the JSON within "
                               "max_new_tokens", retryable=False)
        if call.temperature <= 0:  # the best allowed token; ids ascend, so a tie goes to the lowest id as in
            token = int(index[int(torch.argmax(logits[index]).item())].item())  # the whole masked vocabulary
        else:
            masked = torch.full_like(logits, float("-inf"))
            masked[index] = logits[index]
            token = _pick(masked, call.temperature, row.generator)
        row.out.append(token)
        row.state = rules.grammar.advance(row.state, rules.index.strings[token] or "")
        if rules.grammar.cost(row.state) == 0:
            _finish(loaded, row)
            return None
    if len(row.out) >= call.max_new_tokens:
        _finish(loaded, row)
        return None
    return token


def _finish(loaded: Loaded, row: _Row) -> None:
    out = row.out
    if row.rules is not None:
        strings = row.rules.index.strings
        text = "".join(strings[i] or "" for i in out)
    else:
        text = loaded.tokenizer.decode(out, skip_special_tokens=True)
    row.queued.future.set_result((text, len(row.ids), len(out)))


def _allowed(loaded: Loaded, rules: TokenConstraint, state: Any, left: int) -> Any:
    """The ids of the tokens allowed in ``state`` after which the JSON can be closed in ``left`` tokens, as an
    ascending tensor; the tensors of each state are kept (most states recur: inside a string, between
    properties)."""
    key = (id(rules), state)
    found = loaded.masks.get(key)
    if found is None:
        ids, costs = rules.allowed(state)
        if len(loaded.masks) >= 4096:
            loaded.masks.clear()
        index, order = torch.sort(torch.tensor(ids, dtype=torch.long))
        cost = torch.tensor(costs, dtype=torch.long)[order]
        found = loaded.masks[key] = (index, cost, max(costs, default=0))
    index, cost, highest = found
    return index if left >= highest else index[cost <= left]


def _pick(logits: Any, temperature: float, generator: Any) -> int:
    if temperature <= 0:
        return int(torch.argmax(logits).item())
    probs = torch.softmax(logits / temperature, dim=-1)
    return int(torch.multinomial(probs, 1, generator=generator).item())
