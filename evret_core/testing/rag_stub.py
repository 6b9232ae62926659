"""A stub "model" for the RAG harness's LLM parts: a :class:`~evret_core.testing.llm_stubs.StubLLMServer`
responder that reads the fenced question, answer, claim and contexts of the harness's prompts and answers each
kind of request deterministically, as a careful small model would:

- generation: answers with the first sentence of the context sharing most words with the question, as one claim
  citing that context; refuses when no context shares a word;
- generation for a turn of a conversation: the same, the question's words joined by those of the user's earlier
  messages (what "it" refers to); when two contexts share the most words with different sentences, it asks the
  user which one they mean (``clarified``) instead;
- claim extraction: the answer's sentences;
- claim verification: ``supported`` by the contexts (and the conversation's messages, ``history:...``) that contain
  the claim's text, ``contradicted`` by one that contains it with a ``not`` removed or added, else ``unsupported``;
- answer relevance: 5 when the answer shares a word with the question, else 2.

The prompts are recognised by their default system prompts (a custom prompt gets ``{"error": ...}``, which does
not validate). Used by tests/rag and benchmarks/rag_llm.py.
"""

from __future__ import annotations

import json
import re
from typing import Any

from evret_core.rag.claims.llm_judge import EXTRACT_SYSTEM_PROMPT, VERIFY_SYSTEM_PROMPT
from evret_core.rag.generate.llm_generator import CONVERSATION_SYSTEM_PROMPT, DEFAULT_SYSTEM_PROMPT
from evret_core.rag.scores.relevance import RELEVANCE_SYSTEM_PROMPT
from evret_core.testing.llm_stubs import StubReply, StubRequest, first_user_prompt

_FENCED = re.compile(r"<(question|answer|claim|context)-([0-9a-f]{16})>\n(.*?)\n</\1-\2>", re.DOTALL)
_CONTEXT = re.compile(r"Context id (\"(?:[^\"\\]|\\.)*\"):\n<context-([0-9a-f]{16})>\n(.*?)\n</context-\2>",
                      re.DOTALL)
_MESSAGE = re.compile(r"Message id (\"(?:[^\"\\]|\\.)*\"):\n<message-([0-9a-f]{16})>\n(.*?)\n</message-\2>",
                      re.DOTALL)
_WORDS = re.compile(r"[a-z0-9]{4,}")


def _words(text: str) -> set[str]:
    return set(_WORDS.findall(text.lower()))


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]


def parse_prompt(prompt: str) -> dict[str, Any]:
    """The fenced fields of a harness prompt: ``question``, ``answer``, ``claim`` (texts), ``contexts`` and the
    conversation's ``messages`` (each ``[(id, text)]``)."""
    fields: dict[str, Any] = {}
    for name, _, text in _FENCED.findall(prompt):
        if name != "context":
            fields.setdefault(name, text)
    fields["contexts"] = [(json.loads(doc_id), text) for doc_id, _, text in _CONTEXT.findall(prompt)]
    fields["messages"] = [(json.loads(doc_id), text) for doc_id, _, text in _MESSAGE.findall(prompt)]
    return fields


_HISTORY = re.compile(r"(User|Assistant):\n<message-([0-9a-f]{16})>\n(.*?)\n</message-\2>", re.DOTALL)


def parse_history(prompt: str) -> list[tuple[str, str]]:
    """The earlier messages of the ``llm`` generator's conversation prompt, oldest first: ``(label, text)``, the
    label ``User`` or ``Assistant``."""
    return [(label, text) for label, _, text in _HISTORY.findall(prompt)]


def _generate(fields: dict[str, Any], conversation: bool = False) -> dict[str, Any]:
    asked = _words(fields.get("question", ""))
    if conversation:
        asked |= {w for label, text in fields["history"] if label == "User" for w in _words(text)}
    best: tuple[int, str, str] | None = None
    tied: tuple[str, str] | None = None  # another context's sentence as good as the best one
    for doc_id, text in fields["contexts"]:
        shared = len(asked & _words(text))
        sentence = next((s for s in _sentences(text) if asked & _words(s)), text)
        if shared and best is not None and shared == best[0] and sentence != best[2]:
            tied = (doc_id, sentence)
        if shared and (best is None or shared > best[0]):
            best, tied = (shared, doc_id, sentence), None
    stopped = {"refused": False, "escalated": False, **({"clarified": False} if conversation else {})}
    if best is None:
        return {"answer": "", "claims": [], **stopped, "refused": True}
    if conversation and tied is not None:
        return {"answer": f"Do you mean: {best[2]} or: {tied[1]}?", "claims": [], **stopped, "clarified": True}
    return {"answer": best[2], "claims": [{"text": best[2], "context_ids": [best[1]]}], **stopped}


def _negations(claim: str) -> list[str]:
    out = [claim.replace(" not ", " ")] if " not " in claim else []
    out += [claim.replace(" is ", " is not ", 1)] if " is " in claim else []
    return out


def _verify(fields: dict[str, Any]) -> dict[str, Any]:
    claim = fields.get("claim", "").strip().rstrip(".")
    given = [*fields["contexts"], *fields.get("messages", [])]
    supporting = [d for d, text in given if claim and claim in text]
    if supporting:
        return {"verdict": "supported", "supporting_context_ids": supporting}
    contradicting = [d for d, text in given if any(n in text for n in _negations(claim))]
    if contradicting:
        return {"verdict": "contradicted", "contradicting_context_ids": contradicting}
    return {"verdict": "unsupported"}


def answer_for(request: StubRequest) -> dict[str, Any]:
    """The JSON answer to one harness request (see the module)."""
    prompt = first_user_prompt(request)
    fields = parse_prompt(prompt)
    if request.system.startswith(DEFAULT_SYSTEM_PROMPT):
        return _generate(fields)
    if request.system.startswith(CONVERSATION_SYSTEM_PROMPT):
        return _generate({**fields, "history": parse_history(prompt)}, conversation=True)
    if request.system.startswith(EXTRACT_SYSTEM_PROMPT):
        return {"claims": _sentences(fields.get("answer", ""))}
    if request.system.startswith(VERIFY_SYSTEM_PROMPT):
        return _verify(fields)
    if request.system.startswith(RELEVANCE_SYSTEM_PROMPT):
        shared = _words(fields.get("question", "")) & _words(fields.get("answer", ""))
        return {"grade": 5 if shared else 2, "reason": "stub"}
    return {"error": "unknown prompt"}


def kind_of(request: StubRequest) -> str:
    """``generate``, ``extract``, ``verify``, ``relevance`` or ``other``: which part sent ``request`` (a turn of a
    conversation is ``generate`` too)."""
    for kind, prompt in (("generate", DEFAULT_SYSTEM_PROMPT), ("generate", CONVERSATION_SYSTEM_PROMPT),
                         ("extract", EXTRACT_SYSTEM_PROMPT),
                         ("verify", VERIFY_SYSTEM_PROMPT), ("relevance", RELEVANCE_SYSTEM_PROMPT)):
        if request.system.startswith(prompt):
            return kind
    return "other"


def rag_responder(delay: float = 0.0) -> Any:
    """A responder answering every harness request (see the module) after ``delay`` seconds."""

    def respond(request: StubRequest) -> StubReply:
        return StubReply(text=json.dumps(answer_for(request)), delay=delay)

    return respond
