"""The LLM claim judge: claim extraction and per-claim verification through ``structured_call``.

When an answer lists no claims, the model first splits it into claims (:class:`ExtractedClaims`; a refusal makes
none). Then each claim is verified on its own against the contexts the generator saw (:class:`ClaimCheck`):
``supported`` (naming the supporting context ids), ``contradicted`` (naming the contradicting ids) or
``unsupported``. An answer naming an id that is not among the contexts, a ``supported`` without a supporting id or
a ``contradicted`` without a contradicting id is sent back with the error. A claim whose call fails after the
client's retries is ``unmeasured``; an answer whose extraction fails is one unmeasured claim. A claim judged
against no context at all is ``unsupported`` without a call.

For a turn of a conversation (``ClaimTask.history``), the verification prompt starts with the conversation so far,
each message fenced under its id ``history:{i}:{role}`` as contexts are (:data:`HISTORY_BLOCK`), the system prompt
gains :data:`VERIFY_HISTORY_NOTE`, and those ids may be named as supporting or contradicting. A task without
history is asked exactly as before (same prompt, same cache key).

It plugs into the harness where the lexical judge does: ``RagEvaluator(claim_judge=LLMClaimJudge(...))`` or
``evret rag --claim-judge llm``. Prompts: :data:`EXTRACT_SYSTEM_PROMPT` / :data:`EXTRACT_TEMPLATE` (fields
``{question}``, ``{answer}``) and :data:`VERIFY_SYSTEM_PROMPT` / :data:`VERIFY_TEMPLATE` (``{question}``,
``{claim}``, ``{contexts}``), each overridable by the option of the same name in lower case.

The contexts claims are verified against are scanned for prompt-injection patterns, each distinct text once per
run (see :mod:`evret_core.rag.llm_part`): one WARNING line, the counts in ``stats()["injection"]``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from evret_core.contracts.aio import run_sync
from evret_core.contracts.claims import ClaimJudge, ClaimTask, ClaimVerdict
from evret_core.contracts.errors import EvretError
from evret_core.contracts.generation import Claim
from evret_core.llm.choices import with_choices
from evret_core.llm.client import gather_all
from evret_core.llm.fencing import fence
from evret_core.llm.settings import LLMSettings
from evret_core.llm.structured import AnswerError
from evret_core.rag.claims.claim_judges import LexicalClaimJudge, evidence, history_evidence
from evret_core.rag.generate.llm_generator import OUTPUT_TOKENS_GUESS, coerce_ids
from evret_core.rag.llm_part import (
    CONVERSATION_FENCE_NAMES,
    FENCE_NAMES,
    LLMPart,
    check_template,
    estimate_call_tokens,
    fence_contexts,
)

EXTRACT_SYSTEM_PROMPT = (
    "You split an answer into its claims: the short, self-contained factual statements it makes, with pronouns "
    "replaced by what they refer to. Add nothing that the answer does not say. An answer that states no fact "
    "(a refusal, a question back) has no claims."
)
EXTRACT_TEMPLATE = "Question:\n{question}\n\nAnswer:\n{answer}\n\nList the claims this answer makes."

VERIFY_SYSTEM_PROMPT = (
    "You check one claim against context documents. The claim is supported when a context document states it or "
    "clearly implies it; contradicted when a context document states something incompatible with it; "
    "unsupported otherwise (including when it is merely plausible). Name the ids of the context documents that "
    "support it (supporting_context_ids) or contradict it (contradicting_context_ids)."
)
VERIFY_TEMPLATE = ("Question:\n{question}\n\nClaim:\n{claim}\n\nContext documents:\n{contexts}\n\n"
                   "Is the claim supported, contradicted or unsupported by these documents?")
VERIFY_HISTORY_NOTE = (
    " The messages of the conversation so far are evidence as the context documents are: a claim is also supported "
    "when an earlier message states it or clearly implies it, and contradicted when one states something "
    "incompatible with it; name those messages by their ids (such as history:0:user) among the supporting or "
    "contradicting ids."
)
"""Appended to the verification system prompt for a claim of a conversation's turn."""
HISTORY_BLOCK = "Conversation so far (oldest first):\n{history}\n\n"
"""What precedes the verification prompt for a claim of a conversation's turn: the fenced messages."""


class ExtractedClaims(BaseModel):
    """The JSON of a claim extraction: the claims, as statements."""

    claims: list[str] = Field(default_factory=list)


class ClaimCheck(BaseModel):
    """The JSON of one claim's verification."""

    verdict: Literal["supported", "contradicted", "unsupported"]
    supporting_context_ids: list[str] = Field(default_factory=list)
    contradicting_context_ids: list[str] = Field(default_factory=list)

    @field_validator("verdict", mode="before")
    @classmethod
    def _verdict(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("supporting_context_ids", "contradicting_context_ids", mode="before")
    @classmethod
    def _ids(cls, value: Any) -> Any:
        return coerce_ids(value)


def fence_history(task: ClaimTask, nonce: str) -> str:
    """Each message of the task's history as its id (JSON-quoted) above its fenced text, oldest first."""
    return "\n\n".join(f"Message id {json.dumps(m.doc_id, ensure_ascii=False)}:\n"
                       f"{fence('message', m.text, nonce, CONVERSATION_FENCE_NAMES)}" for m in history_evidence(task.history))


def check_schema(ids: Sequence[str]) -> type[ClaimCheck]:
    """:class:`ClaimCheck` whose JSON Schema lists ``ids`` as the only context ids (validation is
    :func:`_checker`'s), so that a provider which constrains its output cites only those."""
    return with_choices(ClaimCheck, supporting_context_ids=ids, contradicting_context_ids=ids)


def _checker(ids: Sequence[str]) -> Any:
    known = list(dict.fromkeys(ids))

    def check(value: ClaimCheck) -> ClaimCheck:
        unknown = [i for i in (*value.supporting_context_ids, *value.contradicting_context_ids) if i not in known]
        if unknown:
            raise AnswerError(f"context id {unknown[0]!r} is not one of the given ids ({', '.join(known)})")
        if value.verdict == "supported" and not value.supporting_context_ids:
            raise AnswerError("a supported claim needs the id of at least one supporting context document")
        if value.verdict == "contradicted" and not value.contradicting_context_ids:
            raise AnswerError("a contradicted claim needs the id of at least one contradicting context document")
        return value

    return check


class LLMClaimJudge(LLMPart, ClaimJudge):
    """Claim extraction and verification with a chat model (see the module). LLM options as for the ``llm``
    generator (:class:`~evret_core.llm.settings.LLMSettings`, by name or ``settings=``)."""

    name = "llm"
    owner = "llm claim judge"
    label = "rag-claim-judge"
    role = "claim_judge"
    sends_contexts = True

    def __init__(self, provider: Any = None, model: str | None = None, *, extract_system_prompt: str | None = None,
                 extract_template: str | None = None, verify_system_prompt: str | None = None,
                 verify_template: str | None = None, repairs: int = 2, max_tokens: int | None = None,
                 settings: LLMSettings | Mapping[str, Any] | None = None, **options: Any) -> None:
        self.extract_system_prompt = _system(extract_system_prompt, EXTRACT_SYSTEM_PROMPT, "extract_system_prompt")
        self.verify_system_prompt = _system(verify_system_prompt, VERIFY_SYSTEM_PROMPT, "verify_system_prompt")
        self.extract_template = check_template(self.owner, "extract_template", extract_template or EXTRACT_TEMPLATE,
                                               ("question", "answer"), ("answer",))
        self.verify_template = check_template(self.owner, "verify_template", verify_template or VERIFY_TEMPLATE,
                                              ("question", "claim", "contexts"), ("claim", "contexts"))
        given = {k: v for k, v in (("provider", provider), ("model", model)) if v is not None}
        super().__init__(settings, {**given, **options}, repairs=repairs, max_tokens=max_tokens)

    # -- the two calls -----------------------------------------------------------------------------------------
    def extract_call(self, task: ClaimTask) -> tuple[str, dict[str, Any]]:
        prompt = self.extract_template.format(question=fence("question", task.question, self.nonce, FENCE_NAMES),
                                              answer=fence("answer", task.answer_text, self.nonce, FENCE_NAMES))
        return prompt, {"system": self.extract_system_prompt, "template": self.extract_template,
                        "question": task.question, "answer": task.answer_text}

    def verify_system(self, task: ClaimTask) -> str:
        """The verification system prompt for ``task``: with :data:`VERIFY_HISTORY_NOTE` when it has history."""
        return self.verify_system_prompt + VERIFY_HISTORY_NOTE if task.history else self.verify_system_prompt

    def verify_call(self, task: ClaimTask, claim: str) -> tuple[str, dict[str, Any]]:
        if not task.history:  # a single question: today's prompt and cache key, byte for byte
            prompt = self.verify_template.format(question=fence("question", task.question, self.nonce, FENCE_NAMES),
                                                 claim=fence("claim", claim, self.nonce, FENCE_NAMES),
                                                 contexts=fence_contexts(task.contexts, self.nonce))
            return prompt, {"system": self.verify_system_prompt, "template": self.verify_template,
                            "question": task.question, "claim": claim,
                            "contexts": [[c.doc_id, c.text] for c in task.contexts]}
        names = CONVERSATION_FENCE_NAMES  # every fence of the prompt, the messages' included, is cut from every text
        prompt = HISTORY_BLOCK.format(history=fence_history(task, self.nonce)) + self.verify_template.format(
            question=fence("question", task.question, self.nonce, names), claim=fence("claim", claim, self.nonce, names),
            contexts=fence_contexts(task.contexts, self.nonce, names))
        return prompt, {"system": self.verify_system(task), "template": self.verify_template,
                        "history_template": HISTORY_BLOCK, "question": task.question, "claim": claim,
                        "contexts": [[c.doc_id, c.text] for c in task.contexts],
                        "history": [[m.doc_id, m.text] for m in history_evidence(task.history)]}

    async def extract(self, task: ClaimTask) -> list[Claim] | None:
        """The claims of an answer that lists none (None when extraction failed)."""
        prompt, extra = self.extract_call(task)
        result = await self.ask(system=self.extract_system_prompt, prompt=prompt, schema=ExtractedClaims,
                                extra=extra)
        if result.value is None:
            return None
        return [Claim(text=c) for c in dict.fromkeys(c.strip() for c in result.value.claims) if c]

    async def verify(self, task: ClaimTask, claim: Claim) -> ClaimVerdict:
        given = evidence(task)  # the contexts, then the history's messages
        if not given:
            return ClaimVerdict(claim=claim.text, citations=list(claim.citations), verdict="unsupported")
        self.scan_contexts([given])  # a no-op for texts prepare() or an earlier task scanned
        prompt, extra = self.verify_call(task, claim.text)
        ids = [c.doc_id for c in given]
        result = await self.ask(system=self.verify_system(task), prompt=prompt, schema=check_schema(ids),
                                extra=extra, check=_checker(ids))
        if result.value is None:
            return ClaimVerdict(claim=claim.text, citations=list(claim.citations), verdict="unmeasured")
        value = result.value
        return ClaimVerdict(claim=claim.text, citations=list(claim.citations), verdict=value.verdict,
                            supporting=list(dict.fromkeys(value.supporting_context_ids))
                            if value.verdict == "supported" else [],
                            contradicting=list(dict.fromkeys(value.contradicting_context_ids))
                            if value.verdict == "contradicted" else [])

    async def ajudge_task(self, task: ClaimTask) -> list[ClaimVerdict]:
        """The verdicts on one answer's claims: extracted first when the answer lists none, then each claim
        verified concurrently."""
        claims: list[Claim] | None = list(task.claims)
        if task.extract:
            claims = await self.extract(task)
            if claims is None:
                return [ClaimVerdict(claim=task.answer_text, citations=[], verdict="unmeasured")]
        return await gather_all([self.verify(task, c) for c in claims or []])

    def prepare(self, requests: Sequence[Any]) -> None:
        """Scan the contexts and the conversation's messages of every request (claim tasks, generation requests)
        for prompt injections before the first call: the messages are sent as evidence too."""
        self.scan_contexts((*r.contexts, *history_evidence(getattr(r, "history", ()))) for r in requests)

    def judge_claims(self, tasks: Sequence[ClaimTask]) -> list[list[ClaimVerdict]]:
        for task in tasks:
            evidence(task)  # a context id that reads as a message's fails before any call
        self.prepare(tasks)

        async def go() -> list[list[ClaimVerdict]]:
            try:
                return await gather_all([self.ajudge_task(t) for t in tasks])
            finally:
                await self.aclose()

        return run_sync(go())

    # -- planning (--dry-run) ----------------------------------------------------------------------------------
    def plan(self, tasks: Sequence[ClaimTask]) -> dict[str, Any]:
        """Extraction and verification calls after the cache, with token estimates; nothing is sent. The claims of
        an answer whose extraction is not cached are estimated by its sentences (``estimated_claims``)."""
        seen: set[str] = set()
        calls = {"extraction_calls": 0, "verification_calls": 0, "cached": 0, "estimated_claims": 0}
        tokens = 0

        def count(kind: str, system: str, prompt: str, schema: type[BaseModel], extra: dict[str, Any]) -> bool:
            nonlocal tokens
            ident = repr(sorted(extra.items()))
            if ident in seen:
                return True
            seen.add(ident)
            if self.is_cached(system=system, schema=schema, extra=extra):
                calls["cached"] += 1
                return True
            calls[kind] += 1
            tokens += estimate_call_tokens(system, prompt, schema)
            return False

        note = None
        try:
            for task in tasks:
                claims = list(task.claims)
                if task.extract:
                    prompt, extra = self.extract_call(task)
                    extracted = self.cached_value(system=self.extract_system_prompt, schema=ExtractedClaims,
                                                  extra=extra)
                    if extracted is not None:  # the claims the run will verify
                        claims = [Claim(text=c) for c in dict.fromkeys(c.strip() for c in extracted.claims) if c]
                    if not count("extraction_calls", self.extract_system_prompt, prompt, ExtractedClaims, extra):
                        calls["estimated_claims"] += len(claims)
                given = evidence(task)
                if not given:
                    continue
                for claim in claims:
                    prompt, extra = self.verify_call(task, claim.text)
                    count("verification_calls", self.verify_system(task), prompt,
                          check_schema([c.doc_id for c in given]), extra)
        except EvretError as exc:
            note = f"cache not checked ({exc})"
        n = calls["extraction_calls"] + calls["verification_calls"]
        return {"provider": self.settings.provider_name, "model": self.model, **calls, "calls": n,
                "estimated_input_tokens": tokens,
                "estimated_output_tokens": (self.max_tokens or OUTPUT_TOKENS_GUESS // 3) * n,
                **({"note": note} if note else {})}

    def config(self) -> dict[str, Any]:
        custom = {name: getattr(self, name) for name, default in (
            ("extract_system_prompt", EXTRACT_SYSTEM_PROMPT), ("extract_template", EXTRACT_TEMPLATE),
            ("verify_system_prompt", VERIFY_SYSTEM_PROMPT), ("verify_template", VERIFY_TEMPLATE))
            if getattr(self, name) != default}
        return {"name": self.name, **self.base_config(), **custom}


def _system(value: str | None, default: str, option: str) -> str:
    text = default if value is None else str(value)
    if not text.strip():
        raise EvretError(f"llm claim judge: option {option!r} must not be empty")
    return text


def resolve_claim_judge(judge: Any, options: dict[str, Any] | None = None) -> Any:
    """A claim judge: a registered claim judge's name (``lexical``, ``llm`` with LLM ``options``, a plugin's),
    else a registered Evret judge's name or a judge object (the lexical claim judge over it), or an object with
    ``judge_claims``. An unknown name lists both."""
    from evret_core.contracts.errors import UnknownNameError, did_you_mean
    from evret_core.plugins.loading import get_registry
    from evret_core.plugins.registry import create_claim_judge

    options = dict(options or {})
    if isinstance(judge, str):
        registry = get_registry()
        if judge in registry.names("claim_judge"):
            return create_claim_judge(judge, **options)
        try:
            registry.get("judge", judge)
        except UnknownNameError as exc:
            known = ", ".join(registry.names("claim_judge"))
            hint = did_you_mean(judge, registry.names("claim_judge"))
            raise UnknownNameError(f"unknown claim judge {judge!r}{hint}; known claim judges: {known}; or an Evret judge "
                                   f"for the lexical claim judge: {exc}") from None
        return LexicalClaimJudge(judge, **options)
    if callable(getattr(judge, "judge_claims", None)):
        if options:
            raise EvretError("claim judge options apply only to a claim judge given by name")
        return judge
    return LexicalClaimJudge(judge, **options)
