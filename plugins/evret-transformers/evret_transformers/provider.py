"""The ``transformers`` provider: a Hugging Face causal LM run in this process, calls batched.

Options are checked when the provider is built (before any model is loaded): a ``model`` that is neither a local
folder holding a saved model, a hub id already in the Hugging Face cache, a ``.gguf`` file nor a packaged GGUF
model (:mod:`evret_transformers.gguf`) fails with one line naming the option. The model is loaded (a GGUF file
converted, once, into a cached folder) by :meth:`TransformersProvider.warmup`, which
:class:`~evret_core.llm.client.LLMClient` awaits before the first call's timeout starts, once per process
(:mod:`evret_transformers.runtime`), and reused by every provider built with the same model, device and dtype. A
call with ``json_schema`` (what :func:`~evret_core.llm.structured.structured_call` passes to providers that
:attr:`constrains_json`) is decoded under that schema's grammar, so its answer always parses and validates; other
calls generate freely. Calls that arrive together run as one batch (:func:`evret_transformers.runtime.submit`,
up to ``max_batch``), so :attr:`max_concurrency` is ``max_batch``. The provider :attr:`enforces_timeout`: a call's
timeout counts from when its batch starts, not while it waits for earlier batches, and a call past it leaves its
batch (the other rows go on) with an error of kind ``timeout`` that is not retried.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evret_core.sdk import ChatMessage, EvretError, LLMCallError, LLMProvider, LLMResponse
from evret_transformers import DEFAULT_MODEL, gguf

DEVICES = ("auto", "cpu", "cuda", "mps")
DTYPES = ("auto", "float32", "float16", "bfloat16")
MAX_NEW_TOKENS = 512
MAX_BATCH = 8  # docs/benchmarks.md: 8 gained as much as 32 at 2 threads and lost nothing at 1
BATCH_WINDOW_MS = 20.0
STRINGS = ".token-strings.json"  # beside a GGUF conversion's folder: its vocabulary decoded, once
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
_THREADS_LOCK = threading.Lock()
#: the torch thread count a provider of this process set (torch has one pool per process)
_threads_set: int | None = None


class TransformersProvider(LLMProvider):
    """A local causal LM (a folder or a cached hub id). Default model: ``Qwen/Qwen2.5-0.5B-Instruct``.

    :param model: a folder with a saved model and tokenizer, a hub id in the local Hugging Face cache (nothing is
        downloaded), a ``.gguf`` file, or a packaged GGUF model: ``smollm2-135m`` or ``gemma3-270m``
        (:mod:`evret_transformers.gguf`; converted once into the Evret cache folder).
    :param device: ``auto`` (cuda, then mps, then cpu), ``cpu``, ``cuda``, ``cuda:N`` or ``mps``.
    :param dtype: ``auto`` (float32 on cpu, bfloat16 on cuda when supported else float16, float16 on mps),
        ``float32``, ``float16`` or ``bfloat16``.
    :param max_new_tokens: the most tokens one answer may have (a call's ``max_tokens`` may lower it).
    :param seed: seeds sampling at temperature above 0, per call (the same prompt gives the same answer);
        temperature 0 is greedy.
    :param threads: the torch threads of this process (``torch.set_num_threads`` at load); None keeps torch's
        default (every core). One count per process: another provider asking a different one is refused.
    :param max_batch: the most calls generated as one batch (left-padded, each with its own grammar, budget and
        stop); also the calls :class:`~evret_core.llm.client.LLMClient` hands this provider at once (its own
        ``max_concurrency``, 16 by default, bounds them too). 1 runs calls one at a time.
    :param batch_window_ms: how long the first waiting call waits for others to join its batch (milliseconds).
    :param share_prefix: in a batch, prefill the token prefix every prompt starts with once and copy its cache to
        each row (a judge's system message and instructions); the answers are the ones each call gets alone.
    :param timeout: seconds a call's own generation may take, counted from when its batch starts (the wait for
        the model is not counted); None: no limit. :class:`~evret_core.llm.client.LLMClient` hands each call its
        own ``timeout`` instead (:attr:`enforces_timeout`).
    """

    name = "transformers"
    default_model = DEFAULT_MODEL
    constrains_json = True
    max_concurrency = MAX_BATCH
    enforces_timeout = True  # the batcher times each call's own work; a client's clock would count the queue

    def __init__(
        self,
        model: str | None = None,
        device: str = "auto",
        dtype: str = "auto",
        max_new_tokens: int = MAX_NEW_TOKENS,
        seed: int = 0,
        threads: int | None = None,
        max_batch: int = MAX_BATCH,
        batch_window_ms: float = BATCH_WINDOW_MS,
        share_prefix: bool = True,
        timeout: float | None = None,
    ) -> None:
        super().__init__(model)
        self.device = _choice("device", device, DEVICES, allow=r"cuda:\d+")
        self.dtype = _choice("dtype", dtype, DTYPES)
        self.max_new_tokens = _integer("max_new_tokens", max_new_tokens, 1, 1_000_000)
        self.seed = _integer("seed", seed, 0, 2**63 - 1)
        self.threads = None if threads is None else _integer("threads", threads, 1, 4096)
        _check_threads(self.threads)
        self.max_batch = _integer("max_batch", max_batch, 1, 1024)
        self.max_concurrency = self.max_batch  # LLMClient hands the batcher this many calls at once
        if isinstance(batch_window_ms, bool) or not isinstance(batch_window_ms, (int, float)) \
                or not 0 <= batch_window_ms <= 10_000:
            raise EvretError(f"transformers provider: option 'batch_window_ms' must be a number of milliseconds "
                             f"from 0 to 10000, got {batch_window_ms!r}")
        self.batch_window_ms = float(batch_window_ms)
        if not isinstance(share_prefix, bool):
            raise EvretError(f"transformers provider: option 'share_prefix' must be true or false, got "
                             f"{share_prefix!r}")
        self.share_prefix = share_prefix
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                    or not 0 < timeout < float("inf")):
            raise EvretError(f"transformers provider: option 'timeout' must be a number of seconds above 0, got "
                             f"{timeout!r}")
        self.timeout = None if timeout is None else float(timeout)
        # what would make every call fail is refused here, before any work: a broken folder, a budget beyond the
        # model's context, a device this machine lacks (a GGUF model's folder exists once converted: checked
        # then, at warm-up)
        self.gguf = gguf.resolve(self.model) if gguf.is_gguf(self.model) else None
        if self.gguf is None:
            self.source, self.fingerprint = resolve_model(self.model)
            self._check_folder(model_folder(self.source, self.model))
        else:
            self.source, self.fingerprint = "", self.gguf.sha256
        check_device(self.device)
        self._kept_schemas: set[str] = set()
        self._ready = False
        self._loaded: Any = None  # runtime.Loaded, once warm

    def _check_folder(self, folder: Path) -> None:
        config = check_model_folder(folder)
        context = context_length(config)
        if context is not None and self.max_new_tokens >= context:
            raise EvretError(f"transformers provider: option 'max_new_tokens' {self.max_new_tokens} leaves no room "
                             f"for a prompt in the model's context of {context} tokens ({_context_key(config)} in "
                             f"its config.json); give at most {context - 1}, and less than that by the longest "
                             f"prompt")

    def __repr__(self) -> str:
        return f"TransformersProvider(model={self.model!r}, device={self.device!r}, dtype={self.dtype!r})"

    def config(self) -> dict[str, Any]:
        # The fingerprint changes when the files of a local model change, so cached answers of older weights
        # under the same path are not reused.
        return {"provider": self.name, "model": self.model, "fingerprint": self.fingerprint, "dtype": self.dtype,
                "device": self.device, "max_new_tokens": self.max_new_tokens, "seed": self.seed}

    async def warmup(self) -> None:
        """Convert a GGUF model (first use only) and load the model, in a worker thread: called once by
        :class:`~evret_core.llm.client.LLMClient` before any call's timeout starts."""
        if not self._ready:
            await asyncio.to_thread(self._load)

    def _load(self) -> None:
        """Everything :meth:`warmup` does; a model that cannot load is one :class:`EvretError` naming it."""
        from evret_transformers import runtime

        _apply_threads(self.threads)
        if self.gguf is not None and not self.source:
            dtype = runtime.resolve_dtype(self.dtype, runtime.resolve_device(self.device))
            try:
                folder = gguf.converted(self.gguf, dtype)
            except EvretError:
                raise
            except Exception as exc:  # a file with GGUF's magic that transformers cannot read
                raise EvretError(f"transformers provider: option 'model': the GGUF model {self.model!r} cannot be "
                                 f"converted: {_one_line(exc)}") from None
            self._check_folder(folder)
            self.source = str(folder)
        strings = None if self.gguf is None else Path(self.source).with_name(Path(self.source).name + STRINGS)
        try:
            self._loaded = runtime.load(self.source, self.device, self.dtype, strings_file=strings)
        except Exception as exc:  # out of memory, broken weights: one line, not a traceback per call
            raise EvretError(f"transformers provider: option 'model': {self.model!r} cannot be loaded: "
                             f"{_one_line(exc)}") from None
        self._ready = True

    async def acomplete(
        self,
        messages: Sequence[ChatMessage],
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        json_schema: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> LLMResponse:
        """One completion, batched with the calls that arrive with it; ``timeout`` (default the provider's) counts
        from when its batch starts, and a call past it fails with kind ``timeout``, not retryable."""
        if json_schema is not None:
            self._check_schema(json_schema)  # before the model is loaded or run
        from evret_transformers import runtime

        await self.warmup()  # a no-op after the client's warm-up; loads the model for a direct caller
        budget = self.max_new_tokens if max_tokens is None else max(1, min(self.max_new_tokens, int(max_tokens)))
        cancel = threading.Event()
        call = runtime.Call(messages=list(messages), temperature=float(temperature), max_new_tokens=budget,
                            seed=self.seed, json_schema=json_schema, cancel=cancel, threads=self.threads,
                            share_prefix=self.share_prefix, timeout=self.timeout if timeout is None else timeout)
        try:
            text, used_in, used_out = await asyncio.wrap_future(
                runtime.submit(self._loaded, call, self.max_batch, self.batch_window_ms / 1000))
        except asyncio.CancelledError:
            cancel.set()  # the row leaves its batch at the next token; the other rows go on
            raise
        except LLMCallError:
            raise
        except Exception as exc:  # a model that cannot run (out of memory, broken files): not worth retrying
            raise LLMCallError(f"{self.name}: {type(exc).__name__}: {exc}", retryable=False) from None
        return LLMResponse(text=text, input_tokens=used_in, output_tokens=used_out, model=self.model)


    def _check_schema(self, schema: Mapping[str, Any]) -> None:
        """An :class:`LLMCallError` (not retryable) naming the keyword of a schema constrained decoding cannot
        keep (:mod:`evret_transformers.grammar`), before any model work; schemas already accepted are
        remembered."""
        from evret_transformers.grammar import JsonGrammar, SchemaNotSupported, check_nesting

        try:
            check_nesting(schema)  # first: a very deep schema must not reach json.dumps
            key = json.dumps(schema, sort_keys=True, default=str)
            if key not in self._kept_schemas:
                JsonGrammar(schema)
                if len(self._kept_schemas) >= 4096:
                    self._kept_schemas.clear()
                self._kept_schemas.add(key)
        except SchemaNotSupported as exc:
            raise LLMCallError(f"transformers: the JSON schema cannot be decoded under constraint: {exc}",
                               retryable=False) from None


def _choice(option: str, value: Any, allowed: Sequence[str], allow: str | None = None) -> str:
    text = str(value).strip().lower() if isinstance(value, str) else None
    if text is None or not (text in allowed or (allow is not None and re.fullmatch(allow, text))):
        raise EvretError(f"transformers provider: option {option!r} must be one of {', '.join(allowed)}"
                         f"{' or cuda:N' if allow else ''}, got {value!r}")
    return text


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}" if text else type(exc).__name__


def _check_threads(threads: int | None) -> None:
    if threads is not None and _threads_set is not None and threads != _threads_set:
        raise EvretError(f"transformers provider: option 'threads' {threads}: another transformers provider of this "
                         f"process set torch to {_threads_set} threads, and torch keeps one thread pool per "
                         f"process; give the same count to every provider (or none)")


def _apply_threads(threads: int | None) -> None:
    """``torch.set_num_threads(threads)``, once per process; a different count later is refused."""
    global _threads_set
    if threads is None:
        return
    with _THREADS_LOCK:
        _check_threads(threads)
        if _threads_set is None:
            import torch

            torch.set_num_threads(threads)
            _threads_set = threads


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
    looks_like_path = model.startswith((".", "/", "~")) or os.sep in model.strip("/").replace("/", "", 1)
    if not looks_like_path and _HUB_ID.match(model):
        cached = _cached_hub_model(model)
        if cached is not None:
            return model, cached
    raise EvretError(f"transformers provider: option 'model': no model at {model!r}: it is neither a folder "
                     f"nor a Hugging Face hub id in the local cache (the provider works offline: download it "
                     f"first, e.g. `hf download {model if not looks_like_path else 'ORG/NAME'}`, or give a folder "
                     f"written by save_pretrained)")


_CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length", "n_ctx")
_WEIGHTS = ("*.safetensors", "*.bin", "*.pt", "*.safetensors.index.json", "*.bin.index.json")
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json", "vocab.txt",
                    "spiece.model")


def model_folder(source: str, model: str) -> Path:
    """The folder a resolved model loads from: ``source`` itself, or a cached hub id's snapshot."""
    path = Path(source)
    if path.is_dir():
        return path
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(model, "config.json")
    assert isinstance(found, str)  # resolve_model found it there
    return Path(found).parent


def check_model_folder(folder: Path) -> dict[str, Any]:
    """The model's config (its config.json, read), or an :class:`EvretError` naming the option ``model`` for a
    folder that cannot load: config.json that is not a JSON object, no weights, no tokenizer."""
    where = f"transformers provider: option 'model': the folder {str(folder)!r}"
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise EvretError(f"{where} is broken: its config.json is not valid JSON (line {exc.lineno} column "
                         f"{exc.colno}: {exc.msg})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise EvretError(f"{where}: its config.json cannot be read: {exc}") from None
    if not isinstance(config, dict):
        raise EvretError(f"{where} is broken: its config.json holds no JSON object")
    if not any(next(folder.glob(pattern), None) is not None for pattern in _WEIGHTS):
        raise EvretError(f"{where} holds no weights (*.safetensors or *.bin); give a folder written by "
                         f"save_pretrained (model and tokenizer)")
    if not any((folder / name).is_file() for name in _TOKENIZER_FILES):
        raise EvretError(f"{where} holds no tokenizer ({', '.join(_TOKENIZER_FILES[:2])}...); save the tokenizer "
                         f"beside the model (tokenizer.save_pretrained)")
    return config


def _context_key(config: dict[str, Any]) -> str | None:
    text_config = config.get("text_config")
    for section in (config, text_config if isinstance(text_config, dict) else {}):
        for key in _CONTEXT_KEYS:
            value = section.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return key
    return None


def context_length(config: dict[str, Any]) -> int | None:
    """The model's context in tokens, from its config (``max_position_embeddings`` and its other names), or None."""
    key = _context_key(config)
    if key is None:
        return None
    section = config if key in config else config["text_config"]
    return int(section[key])


def check_device(device: str) -> None:
    """An :class:`EvretError` naming the option ``device`` for a device this machine does not have (``cuda``,
    ``cuda:N``, ``mps``); ``auto`` and ``cpu`` always work and import nothing."""
    if device in ("auto", "cpu"):
        return
    import torch

    where = f"transformers provider: option 'device': {device!r}"
    if device.startswith("cuda"):
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        index = int(device.partition(":")[2] or 0)
        if count == 0:
            build = "a CPU-only build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
            raise EvretError(f"{where}: this machine has no CUDA device (torch {torch.__version__}, {build}); use "
                             f"'auto' or 'cpu'")
        if index >= count:
            raise EvretError(f"{where}: this machine has {count} CUDA device(s), cuda:0 to cuda:{count - 1}")
    elif device == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise EvretError(f"{where}: this machine has no MPS device; use 'auto' or 'cpu'")


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
