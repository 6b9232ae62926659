"""The ``llm`` rewriter: a chat model from any provider plugin rewrites a conversation's user message into a
standalone search query.

The model is asked, through :func:`~evret_core.llm.structured.structured_call`, for a JSON object matching
:class:`RewrittenQuery` (``{"query": "..."}``); an answer that does not validate is sent back with its error up to
``repairs`` times. The conversation so far (each message fenced as ``user`` or ``agent``) and the message (fenced as
``message``) go into the prompt as data, between tags carrying a random code the texts cannot know; the prompt is
:data:`DEFAULT_SYSTEM_PROMPT` and :data:`DEFAULT_PROMPT_TEMPLATE` (verbatim in docs/query-forms.md), overridable
with ``system_prompt=`` and ``prompt_template=`` (fields ``{history}`` and ``{message}``). ``history_turns`` keeps
only the last N earlier turns (a turn: a user message and the agent's replies after it).

A call that fails after the client's retries, or whose answer never validates, gives None: the turn is unmeasured
under the ``rewriter`` form, never retrieved with the raw message. Each usable answer is cached as it arrives, keyed
on the un-fenced history and message and the prompt, so a killed run resumes without paying again. The messages
are scanned once per run for prompt-injection patterns (one WARNING line; counts in ``stats()["injection"]``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from evret_core.contracts.aio import run_sync
from evret_core.contracts.conversation import Rewriter, RewriteRequest, Turn
from evret_core.contracts.errors import EvretError
from evret_core.contracts.provider import ChatMessage, LLMProvider
from evret_core.limits import check_int
from evret_core.llm.cache import resolve_cache
from evret_core.llm.client import LLMClient, LLMUsage, estimate_tokens, gather_all, notify
from evret_core.llm.fencing import fence, fence_notice, new_nonce
from evret_core.llm.injection import InjectionScan
from evret_core.llm.settings import LLMSettings
from evret_core.llm.structured import AnswerError, parse_model, structured_call, structured_key

__all__ = ["DEFAULT_PROMPT_TEMPLATE", "DEFAULT_SYSTEM_PROMPT", "LLMRewriter", "RewrittenQuery"]

DEFAULT_SYSTEM_PROMPT = (
    "You rewrite the last user message of a conversation into a standalone search query. Resolve pronouns and "
    "ellipsis from the conversation (who or what 'it', 'they', 'that one' refer to), keep every constraint of the "
    "message and add nothing the conversation does not say. If the message already stands alone, return it "
    "unchanged."
)

DEFAULT_PROMPT_TEMPLATE = (
    "Conversation so far:\n{history}\n\nLast user message:\n{message}\n\nGive the standalone query."
)

PROMPT_FIELDS = ("history", "message")
FENCE_NAMES = ("user", "agent", "message")
NO_HISTORY = "(no earlier messages)"
MAX_QUERY_CHARS = 400
_OWNER = "llm rewriter"
# about what structured_call appends to the system message before the schema (for plan()'s token estimate)
_SCHEMA_SENTENCE = "\n\nAnswer with only a JSON object that matches this JSON schema: "


def _bare_schema(schema: dict[str, Any]) -> None:
    # the schema is appended to the prompt, and any sentence or name in it is text a small model copies as its
    # answer: SmolLM2-135M gave this class's docstring (the schema's description) as the rewrite in 6 of 40 turns,
    # and with the description gone its title, "RewrittenQuery", in 17 of 40; the docstrings are for developers
    for part in (schema, *schema.get("properties", {}).values()):
        part.pop("title", None)
        part.pop("description", None)


class RewrittenQuery(BaseModel):
    """The JSON the ``llm`` rewriter asks for: the standalone query (the JSON schema the prompt carries has no
    title or description: the key, its type and its limits)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_bare_schema)

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)

    @field_validator("query")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value.strip()


def _check_template(template: Any) -> str:
    if not isinstance(template, str) or not template.strip():
        raise EvretError(f"{_OWNER}: option 'prompt_template' must be a non-empty template string")
    probe = {f: f"<{f}>" for f in PROMPT_FIELDS}
    try:
        rendered = template.format(**probe)
    except (KeyError, IndexError, ValueError, AttributeError) as exc:
        raise EvretError(f"{_OWNER}: option 'prompt_template': bad template ({exc!r}); its fields are {{history}} "
                         f"and {{message}}; write literal braces as {{{{ and }}}}") from None
    for name in PROMPT_FIELDS:
        if f"<{name}>" not in rendered:
            raise EvretError(f"{_OWNER}: option 'prompt_template' must contain {{{name}}}")
    return template


class LLMRewriter(Rewriter):
    """Rewrites with a chat model from any provider plugin (see the module).

    :param provider: a registered provider name or an :class:`~evret_core.contracts.provider.LLMProvider`;
        ``model``, ``api_key``, ``base_url``, ``temperature``, ``timeout``, ``retries``, ``max_concurrency``,
        ``rpm``, ``tpm``, ``cache``... are :class:`~evret_core.llm.settings.LLMSettings` options (by name or
        ``settings=``).
    :param system_prompt: the system message; :param prompt_template: the user message (``{history}``,
        ``{message}``).
    :param history_turns: how many earlier turns the prompt holds (None: all of them; 0: none).
    :param max_tokens: the answer's token budget (default 64).
    :param repairs: times an answer that does not validate is sent back with its error (0-10, default 2).
    """

    name = "llm"
    label = "llm-rewriter"

    def __init__(self, provider: Any = None, model: str | None = None, *, system_prompt: str | None = None,
                 prompt_template: str | None = None, history_turns: int | None = None, max_tokens: int = 64,
                 repairs: int = 2, settings: LLMSettings | Mapping[str, Any] | None = None,
                 **options: Any) -> None:
        # every option of the rewriter is checked before the LLM settings, so before any provider or call
        self.system_prompt = DEFAULT_SYSTEM_PROMPT if system_prompt is None else system_prompt
        if not isinstance(self.system_prompt, str) or not self.system_prompt.strip():
            raise EvretError(f"{_OWNER}: option 'system_prompt' must be a non-empty string")
        self.prompt_template = _check_template(DEFAULT_PROMPT_TEMPLATE if prompt_template is None
                                               else prompt_template)
        self.history_turns = (None if history_turns is None
                              else check_int(history_turns, f"{_OWNER}: option 'history_turns'", 0, 1_000_000))
        self.max_tokens = check_int(max_tokens, f"{_OWNER}: option 'max_tokens'", 1, 1_000_000)
        self.repairs = check_int(repairs, f"{_OWNER}: option 'repairs'", 0, 10)
        given = {k: v for k, v in (("provider", provider), ("model", model)) if v is not None}
        self.settings = LLMSettings.build(_OWNER, settings, **{**given, **options})
        self.model = self.settings.default_model()  # an unknown provider fails here, before any work
        self.cache = resolve_cache(self.settings.cache)
        self._provider: LLMProvider | None = (self.settings.provider if isinstance(self.settings.provider,
                                                                                    LLMProvider) else None)
        self._client: LLMClient | None = None
        self._active = 0  # batches in flight: the last one to end closes the provider's connections
        self.nonce = new_nonce()  # one fence code per rewriter: the texts cannot know it
        self.injections = InjectionScan()
        #: False on an executor's worker when the driver scans the run's messages
        self.scan_here = True
        self.reset_stats()

    # -- the provider and client ---------------------------------------------------------------------------
    @property
    def provider(self) -> LLMProvider:
        if self._provider is None:
            self._provider = self.settings.make_provider(_OWNER)
            self.model = self._provider.model
        return self._provider

    @property
    def client(self) -> LLMClient:
        if self._client is None:
            self._client = LLMClient(self.provider, self.settings, cache=self.cache, label=self.label)
        return self._client

    def clients(self) -> list[LLMClient]:
        """The clients this rewriter calls through."""
        return [self.client]

    async def aclose(self) -> None:
        """Release the provider's connections (they reopen on the next call)."""
        if self._provider is not None:
            await self._provider.aclose()

    # -- prompts -------------------------------------------------------------------------------------------
    def window(self, request: RewriteRequest) -> tuple[Turn, ...]:
        """The earlier messages the prompt holds: all of them, or those of the last ``history_turns`` turns."""
        history = request.history
        if self.history_turns is None:
            return history
        starts = [i for i, t in enumerate(history) if t.role == "user"]
        if self.history_turns == 0:
            return ()
        if len(starts) <= self.history_turns:
            return history
        return history[starts[len(starts) - self.history_turns]:]

    def prompt(self, request: RewriteRequest, nonce: str | None = None) -> str:
        """The user message: the fenced history, one fenced message per earlier turn, and the fenced message."""
        code = nonce or self.nonce
        history = self.window(request)
        text = "\n".join(fence(t.role, t.text, code, FENCE_NAMES) for t in history) if history else NO_HISTORY
        return self.prompt_template.format(history=text, message=fence("message", request.message, code,
                                                                        FENCE_NAMES))

    def system(self, nonce: str | None = None) -> str:
        return self.system_prompt + fence_notice(nonce or self.nonce, "message")

    def key_parts(self, request: RewriteRequest) -> dict[str, Any]:
        """What identifies an answer besides the provider, temperature, schema and token budget: the un-fenced
        history the prompt holds, the message and the prompt."""
        return {"rewriter": self.name, "history": [[t.role, t.text] for t in self.window(request)],
                "message": request.message, "prompt": self.system_prompt + "\n\x00\n" + self.prompt_template}

    # -- injections ----------------------------------------------------------------------------------------
    def prepare(self, requests: Sequence[RewriteRequest]) -> None:
        """Scan every message the run sends (before the first call, so the run gets one WARNING line)."""
        self.scan(requests)

    def scan(self, requests: Iterable[RewriteRequest]) -> None:
        if not self.scan_here:
            return
        texts = [t.text for r in requests for t in (*self.window(r), Turn("user", r.message))]
        new = self.injections.add(texts)
        if new:
            notify(self.injections.warning(
                _OWNER, new, texts="conversation message(s)",
                outcome="the rewrites are still the model's: check those turns",
                where="stats['injection']"))

    # -- rewriting -----------------------------------------------------------------------------------------
    async def arewrite(self, request: RewriteRequest) -> str | None:
        """One standalone query; None when none could be made (counted in :meth:`stats`)."""
        result = await structured_call(self.client, system=self.system(), prompt=self.prompt(request),
                                       schema=RewrittenQuery, repairs=self.repairs,
                                       cache_key_extra=self.key_parts(request), max_tokens=self.max_tokens)
        self.calls += 1
        self.cache_hits += result.cached
        self.repaired += max(0, result.tries - 1)
        for name in ("calls", "succeeded", "failed", "input_tokens", "output_tokens"):
            setattr(self.usage, name, getattr(self.usage, name) + getattr(result.usage, name))
        if result.value is None:
            self.unmeasured += 1
            label = result.error.label if result.error is not None else "unusable answer"
            self.errors[label] = self.errors.get(label, 0) + 1
            self.error_examples.setdefault(label, str(result.error or result.unmeasured))
            return None
        query = result.value.query
        self.unchanged += query == request.message.strip()
        return query

    async def abatch_rewrite(self, requests: Sequence[RewriteRequest]) -> list[str | None]:
        """Every request concurrently, each distinct one asked once; the provider's connections close when the
        last concurrent batch ends (an executor's worker runs several on one event loop)."""
        self._active += 1
        try:
            _ = self.provider  # fixes self.model before any cache key is made
            self.scan(requests)
            unique: dict[str, RewriteRequest] = {}
            keys = [json.dumps(self.key_parts(r), sort_keys=True) for r in requests]
            for key, request in zip(keys, requests, strict=True):
                unique.setdefault(key, request)
            got = dict(zip(unique, await gather_all([self.arewrite(r) for r in unique.values()]), strict=True))
            return [got[key] for key in keys]
        finally:
            self._active -= 1
            if self._active == 0:
                await self.aclose()

    def batch_rewrite(self, requests: Sequence[RewriteRequest]) -> list[str | None]:
        if not requests:
            return []
        return run_sync(self.abatch_rewrite(requests))

    def rewrite(self, request: RewriteRequest) -> str | None:
        return self.batch_rewrite([request])[0]

    # -- planning (--dry-run) ------------------------------------------------------------------------------
    def plan(self, requests: Sequence[RewriteRequest]) -> dict[str, Any]:
        """Calls and estimated tokens after dedupe and cache; nothing is sent. A provider that cannot be built
        (no key) leaves ``cached`` at 0 and says why in ``note``."""
        unique = {json.dumps(self.key_parts(r), sort_keys=True): r for r in requests}
        cached: set[str] = set()
        note = None
        if self.cache is not None and unique:
            try:
                client = self.client
            except EvretError as exc:
                note = f"cache not checked ({exc})"
            else:
                keys = {structured_key(client, system="", prompt="", schema=RewrittenQuery,
                                       cache_key_extra=self.key_parts(r), max_tokens=self.max_tokens): ident
                        for ident, r in unique.items()}
                for key, row in self.cache.get_many(list(keys)).items():
                    try:
                        parse_model(str(row["answer"]), RewrittenQuery)
                    except AnswerError:
                        continue  # asked again on a real run
                    cached.add(keys[key])
        to_send = [r for ident, r in unique.items() if ident not in cached]
        calls = len(to_send)
        schema = json.dumps(RewrittenQuery.model_json_schema(), separators=(",", ":"))
        tokens_in = sum(estimate_tokens([ChatMessage("system", self.system("0" * 16) + _SCHEMA_SENTENCE + schema),
                                         ChatMessage("user", self.prompt(r, "0" * 16))]) for r in to_send)
        return {"provider": self.settings.provider_name, "model": self.model, "requests": len(requests),
                "unique": len(unique), "cached": len(cached), "calls": calls, "estimated_input_tokens": tokens_in,
                "estimated_output_tokens": self.max_tokens * calls, **({"note": note} if note else {})}

    # -- accounting ----------------------------------------------------------------------------------------
    def reset_stats(self) -> None:
        self.calls = 0
        self.cache_hits = 0
        self.repaired = 0
        self.unmeasured = 0
        self.unchanged = 0
        self.usage = LLMUsage()
        self.errors: dict[str, int] = {}
        self.error_examples: dict[str, str] = {}
        self.injections.reset()

    def stats(self) -> dict[str, Any]:
        """This run's structured calls, cache hits, API attempts and tokens, answers sent back for repair
        (``repairs``), turns left without a query (``unmeasured``) and why (``errors``, ``error_examples``),
        rewrites equal to the message (``unchanged``) and the injection scan (``injection``)."""
        return {"provider": self.settings.provider_name, "model": self.model, "structured_calls": self.calls,
                "cache_hits": self.cache_hits, **self.usage.to_dict(), "repairs": self.repaired,
                "unmeasured": self.unmeasured, "unchanged": self.unchanged, "errors": dict(self.errors),
                "error_examples": dict(self.error_examples), "injection": self.injections.stats()}

    def config(self) -> dict[str, Any]:
        return {"name": self.name, **self.settings.public(), "model": self.model, "repairs": self.repairs,
                "max_tokens": self.max_tokens, "history_turns": self.history_turns,
                "system_prompt": None if self.system_prompt == DEFAULT_SYSTEM_PROMPT else self.system_prompt,
                "prompt_template": None if self.prompt_template == DEFAULT_PROMPT_TEMPLATE else self.prompt_template}
