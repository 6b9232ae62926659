"""The ``llm`` generator: any registered LLM provider answers from the contexts, with per-claim citations.

The model is asked, through :func:`~evret_core.llm.structured.structured_call`, for a JSON object matching
:class:`GeneratedAnswer`: the answer text, its claims each with the ids of the contexts it cites, and whether it
refused or escalated. The question and each context are fenced as data (random tags the texts cannot close); the
prompt is :data:`DEFAULT_SYSTEM_PROMPT` and :data:`DEFAULT_PROMPT_TEMPLATE` (documented in docs/rag.md), overridable
with ``system_prompt=`` and ``prompt_template=`` (fields ``{question}`` and ``{contexts}``).

A request for a turn of a conversation (``GenerationRequest.history`` not empty) is asked with
:data:`CONVERSATION_SYSTEM_PROMPT` and :data:`CONVERSATION_PROMPT_TEMPLATE` (fields ``{history}``, ``{question}``,
``{contexts}``; overridable with ``conversation_system_prompt=`` and ``conversation_prompt_template=``) for a
:class:`ConversationAnswer`: the earlier messages, oldest first, each as ``User:`` or ``Assistant:`` above its text
fenced as the contexts are; the model may ask the user which reading they mean (``clarified``: its question is the
answer text, with no claims). A request without history is asked exactly as before: same prompt, schema and cache key.

A citation of an id that is not among the request's contexts is dropped and counted (``dropped_citations`` in the
answer's metadata and in :meth:`LLMGenerator.stats`): citation scores only credit what the generator was shown. A
call that fails after the client's retries, or whose answer never validates, gives ``None`` (unmeasured), never a
guess. Each answer is cached as it arrives, keyed on the question, the contexts, the prompt and, for a turn of a
conversation, its history (not the condition: the same contexts under two conditions are asked once).

Each distinct context text is scanned once per run for prompt-injection patterns before it is sent (see
:mod:`evret_core.rag.llm_part`): one WARNING line, the counts in ``stats()["injection"]``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field, field_validator

from evret_core.contracts.aio import run_sync
from evret_core.contracts.conversation import Turn
from evret_core.contracts.errors import EvretError
from evret_core.contracts.generation import Answer, Claim, GenerationRequest, Generator
from evret_core.llm.client import gather_all
from evret_core.llm.fencing import fence
from evret_core.llm.settings import LLMSettings
from evret_core.rag.generate.generators import drop_unknown_citations
from evret_core.rag.llm_part import (
    CONVERSATION_FENCE_NAMES,
    FENCE_NAMES,
    LLMPart,
    check_template,
    estimate_call_tokens,
    fence_contexts,
)

DEFAULT_SYSTEM_PROMPT = (
    "You answer questions for a retrieval-augmented generation system, using only the context documents you are "
    "given. Split your answer into claims: short factual statements, each listing the ids of the context "
    "documents that support it (context_ids). Do not use outside knowledge. If the context documents do not "
    "contain the answer, refuse: set refused to true and leave answer and claims empty. If the question needs a "
    "person (an action on someone's account, a decision, a complaint), set escalated to true."
)

DEFAULT_PROMPT_TEMPLATE = (
    "Question:\n{question}\n\n"
    "Context documents:\n{contexts}\n\n"
    "Answer the question from these documents only. Give the answer text, its claims with the ids of the "
    "context documents that support each one, and whether you refused or escalated."
)

PROMPT_FIELDS = ("question", "contexts")

CONVERSATION_SYSTEM_PROMPT = (
    "You answer the latest message of a conversation for a retrieval-augmented generation system, using only the "
    "context documents you are given; the earlier messages tell you what the latest one refers to. Split your "
    "answer into claims: short factual statements, each listing the ids of the context documents that support it "
    "(context_ids). Do not use outside knowledge. If the question is ambiguous given the conversation (it can mean "
    "several things and the conversation does not say which), ask the user which one they mean: set clarified to "
    "true, put your question to the user in answer and leave claims empty. If the context documents do not contain "
    "the answer, refuse: set refused to true and leave answer and claims empty. If the question needs a person (an "
    "action on someone's account, a decision, a complaint), set escalated to true."
)

CONVERSATION_PROMPT_TEMPLATE = (
    "Conversation so far, oldest message first:\n{history}\n\n"
    "Question (the user's latest message):\n{question}\n\n"
    "Context documents:\n{contexts}\n\n"
    "Answer the question, read in the light of the conversation, from these documents only. Give the answer text, "
    "its claims with the ids of the context documents that support each one, and whether you refused, escalated or "
    "asked the user which one they mean (clarified)."
)

CONVERSATION_FIELDS = ("history", "question", "contexts")
ROLE_LABELS = {"user": "User", "agent": "Assistant"}
"""How each :class:`~evret_core.contracts.conversation.Turn` role is labelled in the conversation prompt."""
OUTPUT_TOKENS_GUESS = 150  # for --dry-run estimates when max_tokens is not set


def coerce_ids(value: Any) -> Any:
    """Context ids as strings: a single id becomes a list, integer ids (``3`` for ``"3"``) become strings."""
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        value = [value]
    if isinstance(value, list):
        return [str(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in value]
    return value


class GeneratedClaim(BaseModel):
    """One claim of a generated answer and the ids of the context documents it cites."""

    text: str
    context_ids: list[str] = Field(default_factory=list)

    @field_validator("context_ids", mode="before")
    @classmethod
    def _coerce(cls, value: Any) -> Any:
        return coerce_ids(value)


class GeneratedAnswer(BaseModel):
    """The JSON the ``llm`` generator asks for."""

    answer: str = ""
    claims: list[GeneratedClaim] = Field(default_factory=list)
    refused: bool = False
    escalated: bool = False


class ConversationAnswer(GeneratedAnswer):
    """The JSON the ``llm`` generator asks for a turn of a conversation: also whether it asked the user back."""

    clarified: bool = False


def fence_history(history: Sequence[Turn], nonce: str) -> str:
    """Each earlier message, oldest first, as its role's label (:data:`ROLE_LABELS`) above its fenced text."""
    return "\n\n".join(f"{ROLE_LABELS[t.role]}:\n{fence('message', t.text, nonce, CONVERSATION_FENCE_NAMES)}"
                         for t in history)


class LLMGenerator(LLMPart, Generator):
    """Answers with a chat model from any provider plugin (see the module).

    :param provider: a registered provider name or an :class:`~evret_core.contracts.provider.LLMProvider`; ``model``,
        ``api_key``, ``base_url``, ``temperature``, ``timeout``, ``retries``, ``max_concurrency``, ``rpm``,
        ``tpm``, ``cache``... are :class:`~evret_core.llm.settings.LLMSettings` options (by name or ``settings=``).
    :param system_prompt: the system message; :param prompt_template: the user message (``{question}``,
        ``{contexts}``).
    :param conversation_system_prompt: and :param conversation_prompt_template: the same for a request with
        history (``{history}``, ``{question}``, ``{contexts}``).
    :param repairs: times an answer that does not validate is sent back with its error.
    :param max_tokens: the answer's token budget (default: the provider's).
    """

    name = "llm"
    owner = "llm generator"
    label = "rag-generator"
    role = "generator"
    sends_contexts = True

    def __init__(self, provider: Any = None, model: str | None = None, *, system_prompt: str | None = None,
                 prompt_template: str | None = None, conversation_system_prompt: str | None = None,
                 conversation_prompt_template: str | None = None, repairs: int = 2, max_tokens: int | None = None,
                 settings: LLMSettings | Mapping[str, Any] | None = None, **options: Any) -> None:
        self.system_prompt = DEFAULT_SYSTEM_PROMPT if system_prompt is None else str(system_prompt)
        self.conversation_system_prompt = (CONVERSATION_SYSTEM_PROMPT if conversation_system_prompt is None
                                           else str(conversation_system_prompt))
        for option in ("system_prompt", "conversation_system_prompt"):
            if not getattr(self, option).strip():
                raise EvretError(f"llm generator: option {option!r} must not be empty")
        self.prompt_template = check_template(self.owner, "prompt_template",
                                              DEFAULT_PROMPT_TEMPLATE if prompt_template is None else prompt_template,
                                              PROMPT_FIELDS, PROMPT_FIELDS)
        self.conversation_prompt_template = check_template(
            self.owner, "conversation_prompt_template",
            CONVERSATION_PROMPT_TEMPLATE if conversation_prompt_template is None else conversation_prompt_template,
            CONVERSATION_FIELDS, CONVERSATION_FIELDS)
        given = {k: v for k, v in (("provider", provider), ("model", model)) if v is not None}
        super().__init__(settings, {**given, **options}, repairs=repairs, max_tokens=max_tokens)

    def reset_stats(self) -> None:
        super().reset_stats()
        self.dropped_citations = 0

    # -- prompts -----------------------------------------------------------------------------------------------
    def prompt(self, request: GenerationRequest) -> str:
        if request.history:
            names = CONVERSATION_FENCE_NAMES
            return self.conversation_prompt_template.format(
                history=fence_history(request.history, self.nonce),
                question=fence("question", request.question, self.nonce, names),
                contexts=fence_contexts(request.contexts, self.nonce, names))
        return self.prompt_template.format(question=fence("question", request.question, self.nonce, FENCE_NAMES),
                                           contexts=fence_contexts(request.contexts, self.nonce))

    def system(self, request: GenerationRequest) -> str:
        """The system message of ``request``: the conversation one when it has history."""
        return self.conversation_system_prompt if request.history else self.system_prompt

    @staticmethod
    def schema(request: GenerationRequest) -> type[GeneratedAnswer]:
        """The answer schema of ``request``: :class:`ConversationAnswer` when it has history."""
        return ConversationAnswer if request.history else GeneratedAnswer

    def key_parts(self, request: GenerationRequest) -> dict[str, Any]:
        """What keys the cache: the system message, the template, the question, the contexts and, only when there
        is one, the history (so a request without history keeps the key it always had)."""
        if not request.history:
            return {"system": self.system_prompt, "template": self.prompt_template, "question": request.question,
                    "contexts": [[c.doc_id, c.text] for c in request.contexts]}
        return {"system": self.conversation_system_prompt, "template": self.conversation_prompt_template,
                "question": request.question, "contexts": [[c.doc_id, c.text] for c in request.contexts],
                "history": [[t.role, t.text] for t in request.history]}

    # -- generating --------------------------------------------------------------------------------------------
    async def agenerate(self, request: GenerationRequest) -> Answer | None:
        """One answer; None when it could not be made (counted in :meth:`stats`)."""
        self.scan_contexts([request.contexts])  # a no-op for texts prepare() or an earlier request scanned
        result = await self.ask(system=self.system(request), prompt=self.prompt(request),
                                schema=self.schema(request), extra=self.key_parts(request))
        if result.value is None:
            return None
        return self.to_answer(result.value, request, cached=result.cached)

    def to_answer(self, value: GeneratedAnswer, request: GenerationRequest, cached: bool = False) -> Answer:
        """The harness's :class:`Answer`, citations of ids outside the request's contexts dropped and counted;
        a refusal, an escalation or a clarifying question makes no claims."""
        clarified = isinstance(value, ConversationAnswer) and value.clarified
        stopping = value.refused or value.escalated or clarified
        claims = [] if stopping else [Claim(text=c.text, citations=c.context_ids) for c in value.claims
                                      if c.text.strip()]
        answer, dropped = drop_unknown_citations(
            Answer(text=value.answer, claims=claims, refused=value.refused, escalated=value.escalated,
                   clarified=clarified, metadata={"cached": True} if cached else {}), request.contexts)
        self.dropped_citations += dropped
        return answer

    def batch_generate(self, requests: Sequence[GenerationRequest]) -> list[Answer | None]:
        self.prepare(requests)

        async def go() -> list[Answer | None]:
            try:
                return await gather_all([self.agenerate(r) for r in requests])
            finally:
                await self.aclose()

        return run_sync(go())

    def generate(self, request: GenerationRequest) -> Answer | None:
        return self.batch_generate([request])[0]

    # -- planning (--dry-run) ----------------------------------------------------------------------------------
    def lookup(self, request: GenerationRequest) -> Answer | None:
        """The cached answer to ``request`` (without calling anything), or None. Statistics are not touched."""
        value = self.cached_value(system=self.system(request), schema=self.schema(request),
                                  extra=self.key_parts(request))
        if value is None:
            return None
        before = self.dropped_citations
        answer = self.to_answer(value, request, cached=True)
        self.dropped_citations = before
        return answer

    def plan(self, requests: Sequence[GenerationRequest]) -> dict[str, Any]:
        """Calls and estimated tokens after dedupe and cache; nothing is sent."""
        unique = {repr(sorted(self.key_parts(r).items())): r for r in requests}
        note = None
        try:
            to_send = [r for r in unique.values() if self.lookup(r) is None]
        except EvretError as exc:  # no key for the provider: nothing can be looked up, everything counts
            to_send, note = list(unique.values()), f"cache not checked ({exc})"
        tokens_in = sum(estimate_call_tokens(self.system(r) + self.notice(), self.prompt(r), self.schema(r))
                        for r in to_send)
        return {"provider": self.settings.provider_name, "model": self.model, "requests": len(requests),
                "unique": len(unique), "cached": len(unique) - len(to_send), "calls": len(to_send),
                "estimated_input_tokens": tokens_in,
                "estimated_output_tokens": (self.max_tokens or OUTPUT_TOKENS_GUESS) * len(to_send),
                **({"note": note} if note else {})}

    def stats(self) -> dict[str, Any]:
        return {**super().stats(), "dropped_citations": self.dropped_citations}

    def config(self) -> dict[str, Any]:
        return {"name": self.name, **self.base_config(),
                "system_prompt": None if self.system_prompt == DEFAULT_SYSTEM_PROMPT else self.system_prompt,
                "prompt_template": None if self.prompt_template == DEFAULT_PROMPT_TEMPLATE else self.prompt_template,
                # the conversation prompts only when changed: a run that keeps them records what it always did
                **({"conversation_system_prompt": self.conversation_system_prompt}
                   if self.conversation_system_prompt != CONVERSATION_SYSTEM_PROMPT else {}),
                **({"conversation_prompt_template": self.conversation_prompt_template}
                   if self.conversation_prompt_template != CONVERSATION_PROMPT_TEMPLATE else {})}
