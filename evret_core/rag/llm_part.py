"""What the RAG harness's LLM parts share: settings, the client, fenced contexts, one ``ask`` and the accounting.

The ``llm`` generator, the LLM claim judge and the LLM answer-relevance scorer each hold one
:class:`~evret_core.llm.client.LLMClient` (built on first use, so that a dry run needs no key) and call the model only
through :func:`~evret_core.llm.structured.structured_call`: JSON validated against a pydantic schema, invalid answers sent back
with their error, usable answers committed to the LLM layer's cache as they arrive (a killed run resumes without
paying again), and a call that still fails after the client's retries *unmeasured*, never guessed.

The parts that send context documents (the generator and the claim judge: ``sends_contexts``) scan each distinct
context text once per run for the usual prompt-injection patterns (:mod:`evret_core.llm.injection`, the ``llm``
judge's detector): :meth:`LLMPart.prepare` scans every context of the run before the first call, so a run gives one
WARNING line per part (the count and an example), and the counts are in :meth:`LLMPart.stats` (``injection``, the
judge's shape; ``results.stats["llm"][role]["injection"]``) and the manifest (``injection_scan``). The answers
and verdicts stay the model's.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel

from evret_core.contracts.errors import EvretError
from evret_core.contracts.generation import Context
from evret_core.contracts.provider import ChatMessage, LLMProvider
from evret_core.llm.cache import resolve_cache
from evret_core.llm.client import LLMClient, LLMUsage, estimate_tokens, notify
from evret_core.llm.fencing import fence, fence_notice, new_nonce
from evret_core.llm.injection import InjectionScan
from evret_core.llm.settings import LLMSettings
from evret_core.llm.structured import (
    DEFAULT_REPAIRS,
    AnswerError,
    Structured,
    parse_model,
    structured_call,
    structured_key,
)

M = TypeVar("M", bound=BaseModel)

# Every fence name a RAG prompt uses: a text may not forge the tags of any of them.
FENCE_NAMES = ("question", "context", "answer", "claim")
# ... and of a prompt holding a conversation's earlier messages (a history message is fenced as "message")
CONVERSATION_FENCE_NAMES = (*FENCE_NAMES, "message")


def fence_contexts(contexts: Sequence[Context], nonce: str, names: Sequence[str] = FENCE_NAMES) -> str:
    """Each context as its id (JSON-quoted, so an id cannot break out either) above its fenced text; ``names``: the
    fence names of the prompt, whose look-alikes are cut from the texts."""
    if not contexts:
        return "(no context documents)"
    return "\n\n".join(f"Context id {json.dumps(c.doc_id, ensure_ascii=False)}:\n"
                       f"{fence('context', c.text, nonce, names)}" for c in contexts)


def check_template(owner: str, option: str, template: str, fields: Sequence[str], required: Sequence[str]) -> str:
    """``template`` as a ``str.format`` template over ``fields`` that uses each of ``required``; else an
    :class:`EvretError` naming ``owner`` and ``option``."""
    if not isinstance(template, str) or not template.strip():
        raise EvretError(f"{owner}: option {option!r} must be a non-empty template string")
    probe = {f: f"<{f}>" for f in fields}
    try:
        rendered = template.format(**probe)
    except (KeyError, IndexError, ValueError, AttributeError) as exc:
        names = ", ".join(f"{{{f}}}" for f in fields)
        raise EvretError(f"{owner}: option {option!r}: bad template ({exc!r}); its fields are {names}; write "
                         f"literal braces as {{{{ and }}}}") from None
    for name in required:
        if f"<{name}>" not in rendered:
            raise EvretError(f"{owner}: option {option!r} must contain {{{name}}}")
    return template


class LLMPart:
    """One LLM-calling part of the harness (see the module). Subclasses set ``owner`` (for messages) and
    ``label`` (the client's label: part of every cache key, so parts never share answers)."""

    owner = "rag llm part"
    label = "rag-llm"
    #: the part's key in ``results.stats["llm"]``
    role = "llm"
    #: whether the part sends context documents (then it scans them for prompt injections)
    sends_contexts = False

    def __init__(self, settings: LLMSettings | Mapping[str, Any] | None, options: dict[str, Any],
                 repairs: int = DEFAULT_REPAIRS, max_tokens: int | None = None) -> None:
        if isinstance(repairs, bool) or not isinstance(repairs, int) or not 0 <= repairs <= 10:
            raise EvretError(f"{self.owner}: option 'repairs' must be an integer from 0 to 10, got {repairs!r}")
        if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int)
                                       or not 1 <= max_tokens <= 1_000_000):
            raise EvretError(f"{self.owner}: option 'max_tokens' must be an integer from 1 to 1000000, "
                             f"got {max_tokens!r}")
        self.settings = LLMSettings.build(self.owner, settings, **options)
        self.repairs = repairs
        self.max_tokens = max_tokens
        self.model = self.settings.default_model()  # an unknown provider fails here, before any work
        self.cache = resolve_cache(self.settings.cache)
        self._provider: LLMProvider | None = (self.settings.provider if isinstance(self.settings.provider,
                                                                                    LLMProvider) else None)
        self._client: LLMClient | None = None
        self._in_flight: dict[str, asyncio.Task[Any]] = {}
        self.nonce = new_nonce()  # one fence code per run: the texts cannot know it
        self.injections = InjectionScan()
        #: False on an executor's worker: the driver scans every context of the run once (a worker sees only its
        #: chunks, so per-worker counts would count a text shared by two chunks twice, and each would warn)
        self.scan_here = True
        self.reset_stats()

    @property
    def provider(self) -> LLMProvider:
        if self._provider is None:
            self._provider = self.settings.make_provider(self.owner)
            self.model = self._provider.model
        return self._provider

    @property
    def client(self) -> LLMClient:
        if self._client is None:
            self._client = LLMClient(self.provider, self.settings, cache=self.cache, label=self.label)
        return self._client

    def clients(self) -> list[LLMClient]:
        """The clients this part calls through (the harness shares one concurrency pool between them)."""
        return [self.client]

    # -- injections --------------------------------------------------------------------------------------------
    def prepare(self, requests: Sequence[Any]) -> None:
        """Scan the contexts of every request of the run (objects with ``contexts``: generation requests, claim
        tasks) before the first call, so the run gets one WARNING line (the harness's runner calls this)."""
        self.scan_contexts(r.contexts for r in requests)

    def scan_contexts(self, groups: Iterable[Sequence[Context]]) -> None:
        """Scan the context texts not seen this run; one WARNING line for those that look like injections."""
        if not self.sends_contexts or not self.scan_here:
            return
        new = self.injections.add(c.text for group in groups for c in group)
        if new:
            notify(self.injections.warning(
                self.owner, new, texts="context text(s)",
                outcome=f"the {'answers' if self.role == 'generator' else 'verdicts'} are still the model's: "
                        f"check those questions",
                where=f"stats['llm'][{self.role!r}]['injection']"))

    # -- calling -----------------------------------------------------------------------------------------------
    def notice(self) -> str:
        return fence_notice(self.nonce, "context")

    async def ask(self, *, system: str, prompt: str, schema: type[M], extra: Mapping[str, Any],
                  check: Callable[[M], M] | None = None) -> Structured[M]:
        """One structured call; ``extra`` (the un-fenced inputs and the prompt templates) keys the cache. The same
        call asked again while the first is in flight waits for it instead of paying twice."""
        ident = f"{schema.__name__}\x00{json.dumps(dict(extra), sort_keys=True, default=str)}"
        loop = asyncio.get_running_loop()
        task = self._in_flight.get(ident)
        if task is None or task.get_loop() is not loop:
            task = loop.create_task(self._ask(system, prompt, schema, extra, check))
            self._in_flight[ident] = task
            task.add_done_callback(lambda done: self._in_flight.pop(ident, None)
                                   if self._in_flight.get(ident) is done else None)
        result: Structured[M] = await task
        return result

    async def _ask(self, system: str, prompt: str, schema: type[M], extra: Mapping[str, Any],
                   check: Callable[[M], M] | None) -> Structured[M]:
        result = await structured_call(self.client, system=system + self.notice(), prompt=prompt, schema=schema,
                                       repairs=self.repairs, cache_key_extra=extra, check=check,
                                       max_tokens=self.max_tokens)
        self.calls += 1
        self.cache_hits += result.cached
        for name in ("calls", "succeeded", "failed", "input_tokens", "output_tokens"):
            setattr(self.usage, name, getattr(self.usage, name) + getattr(result.usage, name))
        if result.unmeasured is not None:
            reason = result.unmeasured.split(":", 1)[0]
            self.unmeasured[reason] = self.unmeasured.get(reason, 0) + 1
            if result.error is None:  # an answer that could not be used: the first message says why
                self.error_examples.setdefault(reason, result.unmeasured)
        if result.error is not None:  # the failure's kind, and the first message of each kind: the cause
            label = result.error.label
            self.errors[label] = self.errors.get(label, 0) + 1
            self.error_examples.setdefault(label, str(result.error))
        return result

    def is_cached(self, *, system: str, schema: type[BaseModel], extra: Mapping[str, Any]) -> bool:
        """Whether a usable answer to this call is in the cache (builds the provider, never calls it)."""
        return self.cached_value(system=system, schema=schema, extra=extra) is not None

    def cached_value(self, *, system: str, schema: type[M], extra: Mapping[str, Any]) -> M | None:
        """The cached answer to this call, validated, or None (builds the provider, never calls it)."""
        if self.cache is None:
            return None
        key = structured_key(self.client, system=system + self.notice(), prompt="", schema=schema,
                             cache_key_extra=extra, max_tokens=self.max_tokens)
        text = self.client.cached(key)
        if text is None:
            return None
        try:
            return parse_model(text, schema)
        except AnswerError:
            return None

    # -- accounting --------------------------------------------------------------------------------------------
    def reset_stats(self) -> None:
        self.calls = 0
        self.cache_hits = 0
        self.usage = LLMUsage()
        self.unmeasured: dict[str, int] = {}
        self.errors: dict[str, int] = {}
        self.error_examples: dict[str, str] = {}
        self.injections.reset()

    def stats(self) -> dict[str, Any]:
        """This run's structured calls, cache hits, API attempts, tokens, unmeasured items by reason, failed calls by
        kind (``errors``, as the ``llm`` judge's), the first message of each error kind and unmeasured reason
        (``error_examples``), and for
        a part that sends contexts the injection scan (``injection``: detector, scanned, flagged, patterns,
        examples)."""
        out = {"provider": self.settings.provider_name, "model": self.model, "structured_calls": self.calls,
               "cache_hits": self.cache_hits, **self.usage.to_dict(), "unmeasured": dict(self.unmeasured),
               "errors": dict(self.errors), "error_examples": dict(self.error_examples)}
        if self.sends_contexts:
            out["injection"] = self.injections.stats()
        return out

    def base_config(self) -> dict[str, Any]:
        out = {**self.settings.public(), "model": self.model, "repairs": self.repairs,
               "max_tokens": self.max_tokens}
        if self.sends_contexts:  # which detector scanned the contexts, and how many of this run's it flagged
            out["injection_scan"] = {"detector": self.injections.stats()["detector"],
                                     "flagged": self.injections.flagged}
        return out

    async def aclose(self) -> None:
        if self._provider is not None:
            await self._provider.aclose()


def estimate_call_tokens(system: str, prompt: str, schema: type[BaseModel]) -> int:
    """The input tokens of one structured call, its schema included (the LLM layer's ~4 characters per token)."""
    schema_text = json.dumps(schema.model_json_schema(), separators=(",", ":"))
    return estimate_tokens([ChatMessage("system", system + schema_text), ChatMessage("user", prompt)]) + 20
