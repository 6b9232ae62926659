"""Loading a model once per process, building prompts, and the generation loop (free or constrained).

Imported by the provider when it warms up, never at plugin load: this module imports torch and transformers.
The generation loop is Evret's own (a KV-cached forward per token, the prompt's asking for the last position's
scores only when the model's forward takes ``logits_to_keep``): under a JSON schema each step keeps only the
tokens :class:`~evret_transformers.tokens.TokenConstraint` allows and, of those, the ones after which the JSON
can still be closed within the tokens left, so the answer is complete JSON even when the budget runs out. The
answer's text is the concatenation of the chosen tokens' strings, the very text the grammar accepted.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
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
    eos: frozenset[int] = frozenset()
    cache_argument: str = "cache"  # transformers 5 names the KV cache `cache`, earlier releases `past_key_values`
    last_logits: bool = False  # the forward takes `logits_to_keep`: the lm_head runs on the last position only


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


def load(source: str, device: str, dtype: str) -> Loaded:
    """The model of ``source`` on ``device``, loaded on first use and kept for the process."""
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
            import inspect

            parameters = inspect.signature(model.forward).parameters
            loaded = _LOADED[key] = Loaded(model, tokenizer, where, eos=_eos_ids(model, tokenizer),
                                           cache_argument="cache" if "cache" in parameters else "past_key_values",
                                           last_logits="logits_to_keep" in parameters)
        return loaded


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


def constraint(loaded: Loaded, schema: Mapping[str, Any]) -> TokenConstraint:
    """The token constraint of ``schema`` on this model's vocabulary, built once per schema."""
    key = json.dumps(schema, sort_keys=True)
    found = loaded.constraints.get(key)
    if found is None:
        if loaded.index is None:
            loaded.index = TokenIndex(token_strings(loaded.tokenizer))
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
    """``(text, prompt tokens, answer tokens)`` for one call, holding the model's lock throughout."""
    loaded = load(source, device, dtype)
    with loaded.lock:
        if call.cancel.is_set():
            raise _cancelled()
        if call.threads is not None and torch.get_num_threads() != call.threads:
            torch.set_num_threads(call.threads)  # a worker thread that ran torch before keeps its own count
        rules = constraint(loaded, call.json_schema) if call.json_schema is not None else None
        ids = prompt_ids(loaded.tokenizer, call.messages)
        limit = getattr(loaded.model.config, "max_position_embeddings", None)
        if isinstance(limit, int) and len(ids) + call.max_new_tokens > limit:
            raise LLMCallError(f"transformers: a prompt of {len(ids)} tokens plus max_new_tokens="
                               f"{call.max_new_tokens} exceeds the model's context of {limit} tokens",
                               retryable=False)
        out = generate(loaded, ids, call, rules)
    if rules is not None:
        strings = rules.index.strings
        return "".join(strings[i] or "" for i in out), len(ids), len(out)
    return loaded.tokenizer.decode(out, skip_special_tokens=True), len(ids), len(out)


def _cancelled() -> LLMCallError:
    return LLMCallError("transformers: cancelled (timeout)", retryable=True, kind="timeout")


def generate(loaded: Loaded, ids: list[int], call: Call, rules: TokenConstraint | None) -> list[int]:
    """The answer's token ids: greedy at temperature 0, else sampled with a generator seeded per call."""
    model = loaded.model
    generator = torch.Generator(device="cpu").manual_seed(call.seed)
    state = rules.grammar.initial() if rules is not None else None
    if rules is not None and rules.grammar.cost(state) > call.max_new_tokens:  # type: ignore[arg-type]
        raise LLMCallError(f"transformers: max_new_tokens={call.max_new_tokens} is too few for the shortest JSON "
                           f"of the schema ({rules.grammar.cost(state)} tokens); raise the provider option "  # type: ignore[arg-type]
                           f"max_new_tokens (or the caller's max_tokens)", retryable=False)
    out: list[int] = []
    past = None
    step_input = torch.tensor([ids], device=loaded.device)
    # only the last position's scores are used: the prefill's lm_head over every prompt position is skipped
    keep = {"logits_to_keep": 1} if loaded.last_logits else {}
    with torch.inference_mode():
        for step in range(call.max_new_tokens):
            if call.cancel.is_set():
                raise _cancelled()
            result = model(input_ids=step_input, use_cache=True, **{loaded.cache_argument: past}, **keep)
            past = getattr(result, loaded.cache_argument)
            logits = result.logits[0, -1].float().cpu()
            if rules is not None:
                assert state is not None
                index = _allowed(loaded, rules, state, call.max_new_tokens - step - 1)
                if index.numel() == 0:
                    raise LLMCallError("transformers: no token of the vocabulary continues the JSON within "
                                       "max_new_tokens", retryable=False)
                masked = torch.full_like(logits, float("-inf"))
                masked[index] = logits[index]
                logits = masked
            token = _pick(logits, call.temperature, generator)
            if rules is None:
                if token in loaded.eos:
                    break
                out.append(token)
            else:
                out.append(token)
                state = rules.grammar.advance(state, rules.index.strings[token] or "")  # type: ignore[arg-type]
                if rules.grammar.cost(state) == 0:
                    break
            step_input = torch.tensor([[token]], device=loaded.device)
    return out


def _allowed(loaded: Loaded, rules: TokenConstraint, state: Any, left: int) -> Any:
    """The ids of the tokens allowed in ``state`` after which the JSON can be closed in ``left`` tokens, as a
    tensor; the tensors of each state are kept (most states recur: inside a string, between properties)."""
    key = (id(rules), state)
    found = loaded.masks.get(key)
    if found is None:
        ids, costs = rules.allowed(state)
        if len(loaded.masks) >= 4096:
            loaded.masks.clear()
        found = loaded.masks[key] = (torch.tensor(ids, dtype=torch.long), torch.tensor(costs, dtype=torch.long),
                                     max(costs, default=0))
    index, cost, highest = found
    return index if left >= highest else index[cost <= left]


def _pick(logits: Any, temperature: float, generator: Any) -> int:
    if temperature <= 0:
        return int(torch.argmax(logits).item())
    probs = torch.softmax(logits / temperature, dim=-1)
    return int(torch.multinomial(probs, 1, generator=generator).item())
