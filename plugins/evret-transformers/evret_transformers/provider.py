"""The ``transformers`` provider: a Hugging Face causal LM run in this process, one call at a time.

Options are checked when the provider is built (before any model is loaded): a ``model`` that is neither a local
folder holding a saved model nor a hub id already in the Hugging Face cache fails with one line naming the option.
The model is loaded on the first call, once per process (:mod:`evret_transformers.runtime`), and reused by every
provider built with the same model, device and dtype. A call with ``json_schema`` (what
:func:`~evret_core.llm.structured_call` passes to providers that :attr:`constrains_json`) is decoded under that
schema's grammar, so its answer always parses and validates; other calls generate freely.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evret_core.sdk import ChatMessage, EvretError, LLMCallError, LLMProvider, LLMResponse
from evret_transformers import DEFAULT_MODEL

DEVICES = ("auto", "cpu", "cuda", "mps")
DTYPES = ("auto", "float32", "float16", "bfloat16")
MAX_NEW_TOKENS = 512
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


class TransformersProvider(LLMProvider):
    """A local causal LM (a folder or a cached hub id). Default model: ``Qwen/Qwen2.5-0.5B-Instruct``.

    :param model: a folder with a saved model and tokenizer, or a hub id in the local Hugging Face cache
        (nothing is downloaded).
    :param device: ``auto`` (cuda, then mps, then cpu), ``cpu``, ``cuda``, ``cuda:N`` or ``mps``.
    :param dtype: ``auto`` (float32 on cpu, bfloat16 on cuda when supported else float16, float16 on mps),
        ``float32``, ``float16`` or ``bfloat16``.
    :param max_new_tokens: the most tokens one answer may have (a call's ``max_tokens`` may lower it).
    :param seed: seeds sampling at temperature above 0, per call (the same prompt gives the same answer);
        temperature 0 is greedy.
    :param timeout: accepted for the LLM settings' sake; :class:`~evret_core.llm.LLMClient` enforces it.
    """

    name = "transformers"
    default_model = DEFAULT_MODEL
    constrains_json = True
    max_concurrency = 1

    def __init__(
        self,
        model: str | None = None,
        device: str = "auto",
        dtype: str = "auto",
        max_new_tokens: int = MAX_NEW_TOKENS,
        seed: int = 0,
        timeout: float | None = None,
    ) -> None:
        super().__init__(model)
        self.device = _choice("device", device, DEVICES, allow=r"cuda:\d+")
        self.dtype = _choice("dtype", dtype, DTYPES)
        self.max_new_tokens = _integer("max_new_tokens", max_new_tokens, 1, 1_000_000)
        self.seed = _integer("seed", seed, 0, 2**63 - 1)
        self.timeout = timeout
        self.source, self.fingerprint = resolve_model(self.model)

    def __repr__(self) -> str:
        return f"TransformersProvider(model={self.model!r}, device={self.device!r}, dtype={self.dtype!r})"

    def config(self) -> dict[str, Any]:
        # The fingerprint changes when the files of a local model change, so cached answers of older weights
        # under the same path are not reused.
        return {"provider": self.name, "model": self.model, "fingerprint": self.fingerprint, "dtype": self.dtype,
                "device": self.device, "max_new_tokens": self.max_new_tokens, "seed": self.seed}

    async def acomplete(
        self,
        messages: Sequence[ChatMessage],
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        json_schema: Mapping[str, Any] | None = None,
    ) -> LLMResponse:
        from evret_transformers import runtime

        budget = self.max_new_tokens if max_tokens is None else max(1, min(self.max_new_tokens, int(max_tokens)))
        cancel = threading.Event()
        call = runtime.Call(messages=list(messages), temperature=float(temperature), max_new_tokens=budget,
                            seed=self.seed, json_schema=json_schema, cancel=cancel)
        try:
            text, used_in, used_out = await asyncio.to_thread(
                runtime.complete, self.source, self.device, self.dtype, call)
        except asyncio.CancelledError:
            cancel.set()  # the generation loop stops at its next token and frees the model for the next call
            raise
        except LLMCallError:
            raise
        except Exception as exc:  # a model that cannot run (out of memory, broken files): not worth retrying
            raise LLMCallError(f"{self.name}: {type(exc).__name__}: {exc}", retryable=False) from None
        return LLMResponse(text=text, input_tokens=used_in, output_tokens=used_out, model=self.model)


def _choice(option: str, value: Any, allowed: Sequence[str], allow: str | None = None) -> str:
    text = str(value).strip().lower() if isinstance(value, str) else None
    if text is None or not (text in allowed or (allow is not None and re.fullmatch(allow, text))):
        raise EvretError(f"transformers provider: option {option!r} must be one of {', '.join(allowed)}"
                         f"{' or cuda:N' if allow else ''}, got {value!r}")
    return text


def _integer(option: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise EvretError(f"transformers provider: option {option!r} must be an integer from {low} to {high}, "
                         f"got {value!r}")
    return value


def resolve_model(model: str) -> tuple[str, str]:
    """``(where to load it from, a fingerprint of its files)`` for a folder or a cached hub id; an
    :class:`EvretError` naming the option ``model`` otherwise (checked before anything is loaded)."""
    path = Path(os.path.expanduser(model))
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise EvretError(f"transformers provider: option 'model': the folder {str(path)!r} holds no "
                             f"config.json; give a folder written by save_pretrained (model and tokenizer)")
        return str(path.resolve()), _fingerprint(path)
    if path.exists():
        raise EvretError(f"transformers provider: option 'model': {model!r} is a file; give the folder that "
                         f"holds the model (config.json, weights, tokenizer)")
    looks_like_path = model.startswith((".", "/", "~")) or os.sep in model.strip("/").replace("/", "", 1)
    if not looks_like_path and _HUB_ID.match(model):
        cached = _cached_hub_model(model)
        if cached is not None:
            return model, cached
    raise EvretError(f"transformers provider: option 'model': no model at {model!r}: it is neither a folder "
                     f"nor a Hugging Face hub id in the local cache (the provider works offline: download it "
                     f"first, e.g. `hf download {model if not looks_like_path else 'ORG/NAME'}`, or give a folder "
                     f"written by save_pretrained)")


def _fingerprint(folder: Path) -> str:
    digest = hashlib.sha256()
    for file in sorted(p for p in folder.rglob("*") if p.is_file()):
        stat = file.stat()
        digest.update(f"{file.relative_to(folder)}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    return digest.hexdigest()[:16]


def _cached_hub_model(repo_id: str) -> str | None:
    """The cached snapshot's commit of a hub model, or None when it is not in the local cache."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - transformers depends on huggingface_hub
        return None
    found = try_to_load_from_cache(repo_id, "config.json")
    if not isinstance(found, str):
        return None
    return Path(found).parent.name  # snapshots/<commit>/config.json
