"""Answer relevance: does the answer address the question (whether or not it is right)?

Two scorers, reported per question and condition as ``answer_relevance`` in [0, 1] (``None`` for a refusal, an
escalation, a clarifying question or an empty answer, which address nothing and are scored by the behaviour metrics instead):

- ``lexical`` (offline, the default): 1 when the answer has what the question asks for, else 0. What is asked
  for is read from the question's earliest cue: a number for when / how many / how long..., a capitalised name
  for who / where / which...; a question without a cue asks for no particular type. An answer of more than four
  content words (numbers aside) that shares none with the question is about something else: 0. A short answer is not asked to
  repeat the question (the gold answers of the bundled example and of the SQuAD 2.0 subset score 0.89 and 0.96).
  A cheap proxy of the answer's form: it cannot tell a relevant answer from an irrelevant one of the same form.
- ``llm``: a chat model grades from 1 (does not address the question) to 5 (fully addresses it) through
  ``structured_call`` (:class:`RelevanceGrade`), normalised as ``(grade - 1) / 4``; a call that fails is
  unmeasured (``None``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, Field, field_validator

from evret_core.contracts.errors import EvretError
from evret_core.contracts.generation import Answer
from evret_core.llm.fencing import fence
from evret_core.llm.settings import LLMSettings
from evret_core.llm.structured import answer_int
from evret_core.rag.llm_part import FENCE_NAMES, LLMPart, check_template, estimate_call_tokens
from evret_core.text import NAME_CUES, NUMBER_CUES, NUMBER_WORDS, content_words

RELEVANCE_SYSTEM_PROMPT = (
    "You grade whether an answer addresses the question it was given: whether it responds to what was asked, "
    "not whether it is correct. 1 = does not address the question at all; 2 = mostly about something else; "
    "3 = partly addresses it; 4 = addresses it with small digressions or gaps; 5 = directly and fully addresses it."
)
RELEVANCE_TEMPLATE = "Question:\n{question}\n\nAnswer:\n{answer}\n\nHow well does the answer address the question?"
_WORD = re.compile(r"\w+", re.UNICODE)
_BARE_ANSWER = 4  # content words a direct answer may have without sharing one with the question


def answer_text(answer: Answer) -> str | None:
    """What a relevance scorer reads (the text and its claims), or None when the answer addresses nothing."""
    if answer.refused or answer.escalated or answer.clarified:
        return None
    parts = [answer.text, *(c.text for c in answer.claims)]
    text = "\n".join(p for p in parts if p.strip())
    return text or None


def lexical_relevance(question: str, answer: str) -> float:
    """The offline relevance of ``answer`` to ``question``: 1.0 or 0.0 (see the module).

    It does not ask the answer to repeat the question: a bare correct answer ("5 pm" to "At what time does the
    library close?") is as relevant as a sentence that restates the question around it."""
    lowered = question.lower()
    words = _WORD.findall(answer)
    cues = [(m.start(), "number") for cue in NUMBER_CUES for m in re.finditer(rf"\b{re.escape(cue)}", lowered)]
    cues += [(m.start(), "name") for cue in NAME_CUES for m in re.finditer(rf"\b{re.escape(cue)}\b", lowered)]
    wants = min(cues)[1] if cues else None  # the earliest cue: "Who led ... when ...?" asks for a name
    if wants == "number":
        typed = any(w.lower() in NUMBER_WORDS or any(ch.isdigit() for ch in w) for w in words)
    elif wants == "name":
        typed = any(w[:1].isupper() for w in words)
    else:
        typed = True
    said = [w for w in content_words(answer) if w.isalpha()]  # numbers carry no subject
    off_topic = len(said) > _BARE_ANSWER and not set(said) & set(content_words(question))
    return float(typed and not off_topic)


def unmeasured_relevance(outcomes: Iterable[Any], condition: str) -> list[str]:
    """The question ids under ``condition`` whose answer addresses something (see :func:`answer_text`) but got no
    relevance grade: the scorer failed on them (e.g. every retry of an LLM call). A refusal, an escalation, a
    clarifying question or an empty answer has no grade by design and is not counted."""
    out = []
    for q in outcomes:
        oc = q.conditions.get(condition)
        if oc is None or oc.answer is None or "answer_relevance" not in oc.scores:
            continue
        if oc.scores["answer_relevance"] is None and answer_text(oc.answer) is not None:
            out.append(q.question_id)
    return out


class LexicalRelevance:
    """The offline ``lexical`` relevance scorer."""

    name = "lexical"

    def score(self, question: str, answer: Answer) -> float | None:
        text = answer_text(answer)
        return None if text is None else lexical_relevance(question, text)

    def config(self) -> dict[str, Any]:
        return {"name": self.name}


class RelevanceGrade(BaseModel):
    """The JSON of an LLM relevance grade."""

    # the range in the JSON Schema too, so that a provider which constrains its output keeps it
    grade: int = Field(json_schema_extra={"minimum": 1, "maximum": 5})
    reason: str = ""

    @field_validator("grade", mode="before")
    @classmethod
    def _grade(cls, value: Any) -> int:
        return answer_int(value, "grade", 1, 5)


class LLMRelevance(LLMPart):
    """The ``llm`` relevance scorer (see the module); LLM options as for the ``llm`` generator. Prompt:
    :data:`RELEVANCE_SYSTEM_PROMPT` and :data:`RELEVANCE_TEMPLATE` (``{question}``, ``{answer}``), overridable
    with ``system_prompt=`` and ``prompt_template=``."""

    name = "llm"
    owner = "llm answer relevance"
    label = "rag-relevance"

    def __init__(self, provider: Any = None, model: str | None = None, *, system_prompt: str | None = None,
                 prompt_template: str | None = None, repairs: int = 2, max_tokens: int | None = None,
                 settings: LLMSettings | Mapping[str, Any] | None = None, **options: Any) -> None:
        self.system_prompt = RELEVANCE_SYSTEM_PROMPT if system_prompt is None else str(system_prompt)
        if not self.system_prompt.strip():
            raise EvretError("llm answer relevance: option 'system_prompt' must not be empty")
        self.prompt_template = check_template(self.owner, "prompt_template", prompt_template or RELEVANCE_TEMPLATE,
                                              ("question", "answer"), ("question", "answer"))
        given = {k: v for k, v in (("provider", provider), ("model", model)) if v is not None}
        super().__init__(settings, {**given, **options}, repairs=repairs, max_tokens=max_tokens)

    def call(self, question: str, text: str) -> tuple[str, dict[str, Any]]:
        prompt = self.prompt_template.format(question=fence("question", question, self.nonce, FENCE_NAMES),
                                             answer=fence("answer", text, self.nonce, FENCE_NAMES))
        return prompt, {"system": self.system_prompt, "template": self.prompt_template, "question": question,
                        "answer": text}

    async def ascore(self, question: str, answer: Answer) -> float | None:
        text = answer_text(answer)
        if text is None:
            return None
        prompt, extra = self.call(question, text)
        result = await self.ask(system=self.system_prompt, prompt=prompt, schema=RelevanceGrade, extra=extra)
        return None if result.value is None else (result.value.grade - 1) / 4

    def plan(self, items: list[tuple[str, Answer]]) -> dict[str, Any]:
        """Calls after the cache and estimated tokens for ``(question, answer)`` pairs; nothing is sent."""
        unique: dict[str, tuple[str, dict[str, Any]]] = {}
        for question, answer in items:
            text = answer_text(answer)
            if text is not None:
                prompt, extra = self.call(question, text)
                unique.setdefault(repr(sorted(extra.items())), (prompt, extra))
        note = None
        try:
            to_send = [(p, e) for p, e in unique.values()
                       if not self.is_cached(system=self.system_prompt, schema=RelevanceGrade, extra=e)]
        except EvretError as exc:
            to_send, note = list(unique.values()), f"cache not checked ({exc})"
        return {"provider": self.settings.provider_name, "model": self.model, "calls": len(to_send),
                "cached": len(unique) - len(to_send),
                "estimated_input_tokens": sum(estimate_call_tokens(self.system_prompt, p, RelevanceGrade)
                                              for p, _ in to_send),
                "estimated_output_tokens": (self.max_tokens or 40) * len(to_send), **({"note": note} if note else {})}

    def config(self) -> dict[str, Any]:
        return {"name": self.name, **self.base_config(),
                "system_prompt": None if self.system_prompt == RELEVANCE_SYSTEM_PROMPT else self.system_prompt,
                "prompt_template": None if self.prompt_template == RELEVANCE_TEMPLATE else self.prompt_template}


def resolve_relevance(relevance: Any, options: Mapping[str, Any] | None = None) -> Any:
    """A relevance scorer from ``lexical``, ``llm`` (with LLM ``options``), ``none``/None (off), or an object with
    ``score(question, answer)`` or ``ascore``."""
    options = dict(options or {})
    if relevance is None or relevance == "none":
        if options:
            raise EvretError("answer relevance options given, but relevance is off")
        return None
    if relevance == "lexical":
        if options:
            raise EvretError("the lexical answer relevance takes no options")
        return LexicalRelevance()
    if relevance == "llm":
        return LLMRelevance(**options)
    if isinstance(relevance, str):
        raise EvretError(f"unknown answer relevance {relevance!r}; use lexical, llm or none")
    if options:
        raise EvretError("answer relevance options apply only to a relevance given by name")
    if not (callable(getattr(relevance, "score", None)) or callable(getattr(relevance, "ascore", None))):
        raise EvretError(f"cannot use {type(relevance).__name__} as answer relevance: it needs score(question, "
                         f"answer) or ascore(question, answer)")
    return relevance
