"""Generators: turn a question and its contexts into an answer with claims, citations and a refusal flag.

A generator implements ``batch_generate(requests) -> list[Answer | None]`` (``None``: the answer could not be made,
reported as unmeasured). Subclass :class:`Generator` and implement :meth:`Generator.generate`, or hand the harness
a function ``(question, contexts) -> str | dict | Answer``, an object with ``generate``, or precomputed answers
(:class:`PrecomputedGenerator`). Registered generators (``extractive``; ``llm`` once the LLM layer provides it)
come from the ``register_generators`` hook.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evret_core.corpus import iter_json_lines
from evret_core.errors import EvretError
from evret_core.rag.contexts import Context


class Claim(BaseModel):
    """One statement of an answer and the context ids it cites."""

    model_config = ConfigDict(extra="forbid")

    text: str
    citations: list[str] = Field(default_factory=list)


class Answer(BaseModel):
    """A generator's answer. ``refused``: it declined to answer; ``escalated``: it handed the question to a person.
    ``claims`` empty means the judge splits ``text`` into sentence claims without citations."""

    model_config = ConfigDict(extra="forbid")

    text: str = ""
    claims: list[Claim] = Field(default_factory=list)
    refused: bool = False
    escalated: bool = False
    metadata: dict[str, Any] = Field(default_factory=dict)


@dataclass(frozen=True)
class GenerationRequest:
    """What a generator is asked: the question under one condition, with that condition's contexts."""

    question_id: str
    question: str
    contexts: tuple[Context, ...]
    condition: str


class Generator:
    """Base class: implement :meth:`generate`; override :meth:`batch_generate` when batching is cheaper (concurrent
    API calls). ``plan`` (optional) estimates calls and tokens for ``--dry-run``."""

    name: str = "generator"

    def generate(self, request: GenerationRequest) -> Answer | None:
        raise NotImplementedError

    def batch_generate(self, requests: Sequence[GenerationRequest]) -> list[Answer | None]:
        return [self.generate(r) for r in requests]

    def config(self) -> dict[str, Any]:
        return {"name": self.name}


def coerce_answer(raw: Any, where: str) -> Answer | None:
    """An :class:`Answer` from what a user's pipeline returned: an Answer, a string, a dict with Answer's fields
    (``answer`` is accepted for ``text``; a claim may be a string), or None (unmeasured)."""
    if raw is None or isinstance(raw, Answer):
        return raw
    if isinstance(raw, str):
        return Answer(text=raw)
    if isinstance(raw, Mapping):
        data = dict(raw)
        if "answer" in data:
            if "text" in data:
                raise EvretError(f"{where}: give the answer as 'text' or 'answer', not both")
            data["text"] = data.pop("answer")
        if data.get("text") is None:
            data["text"] = ""
        claims = data.get("claims")
        if isinstance(claims, list):
            data["claims"] = [{"text": c} if isinstance(c, str) else c for c in claims]
        try:
            return Answer.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'answer'}: {e['msg']}" for e in exc.errors())
            raise EvretError(f"{where}: {problems}") from None
    raise EvretError(f"{where}: returned a {type(raw).__name__}; return a string, a dict or an Answer")


class CallableGenerator(Generator):
    """A user's function ``fn(question, contexts)`` (contexts: a list of :class:`Context`), or ``fn(request)``
    when it takes one argument."""

    name = "callable"

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        try:
            params = [p for p in inspect.signature(fn).parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
            self._one_arg = len(params) == 1
        except (TypeError, ValueError):
            self._one_arg = False

    def generate(self, request: GenerationRequest) -> Answer | None:
        raw = self.fn(request) if self._one_arg else self.fn(request.question, list(request.contexts))
        return coerce_answer(raw, f"generator {getattr(self.fn, '__name__', 'function')}, question "
                                  f"{request.question_id!r}")

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "function": getattr(self.fn, "__qualname__", repr(self.fn))}


class ObjectGenerator(CallableGenerator):
    """An object of the user's pipeline with ``generate(question, contexts)``."""

    name = "object"

    def __init__(self, obj: Any) -> None:
        super().__init__(obj.generate)
        self.obj = obj

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "class": type(self.obj).__qualname__}


class PrecomputedGenerator(Generator):
    """Answers made elsewhere, looked up by question id and condition.

    Keys are ``(question_id, condition)``; a key with condition ``None`` answers every condition of that question.
    A request with no answer is unmeasured.
    """

    name = "precomputed"

    def __init__(self, answers: Mapping[tuple[str, str | None], Answer], source: str = "<answers>") -> None:
        self.answers = dict(answers)
        self.source = source

    def generate(self, request: GenerationRequest) -> Answer | None:
        found = self.answers.get((request.question_id, request.condition))
        return found if found is not None else self.answers.get((request.question_id, None))

    @classmethod
    def from_jsonl(cls, path: str | Path) -> PrecomputedGenerator:
        """One answer per line: ``question_id``, optional ``condition``, and the answer (``text`` or ``answer``,
        ``claims`` with ``text`` and ``citations``, ``refused``, ``escalated``). Errors name the file and line."""
        answers: dict[tuple[str, str | None], Answer] = {}
        lines: dict[tuple[str, str | None], str] = {}
        for _lineno, where, record in iter_json_lines(path, what="answers file"):
            if not isinstance(record, dict):
                raise EvretError(f"{where}: expected a JSON object, got {type(record).__name__}")
            record = dict(record)
            qid = record.pop("question_id", record.pop("query_id", None))
            if qid in (None, "") or isinstance(qid, (dict, list, bool)):
                raise EvretError(f"{where}: field 'question_id' is missing or not a string")
            condition = record.pop("condition", None)
            if condition is not None and not isinstance(condition, str):
                raise EvretError(f"{where}: field 'condition' must be a string")
            key = (str(qid), condition)
            if key in lines:
                raise EvretError(f"{where}: a second answer for question {qid!r}"
                                 f"{'' if condition is None else f' under {condition!r}'} (first at {lines[key]})")
            lines[key] = where
            answer = coerce_answer(record, where)
            assert answer is not None
            answers[key] = answer
        if not answers:
            raise EvretError(f"{path}: the answers file has no answers")
        return cls(answers, str(path))

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "source": self.source, "answers": len(self.answers)}


def resolve_generator(obj: Any, **options: Any) -> Any:
    """Something with ``batch_generate`` from a registered name, a path to a ``.jsonl`` answers file, a
    :class:`Generator`, an object with ``generate``, or a function."""
    if obj is None:
        raise EvretError("no generator given")
    if isinstance(obj, (str, Path)):
        text = str(obj)
        if text.endswith(".jsonl"):
            if options:
                raise EvretError(f"generator {text}: a precomputed answers file takes no options")
            return PrecomputedGenerator.from_jsonl(text)
        from evret_core.registry import create_generator

        return create_generator(text, **options)
    if options:
        raise EvretError("generator options apply only to a generator given by name")
    if hasattr(obj, "batch_generate"):
        return obj
    if hasattr(obj, "generate"):
        return ObjectGenerator(obj)
    if callable(obj):
        return CallableGenerator(obj)
    raise EvretError(f"cannot use {type(obj).__name__} as a generator: give a registered name, an answers .jsonl "
                     f"file, an object with generate(question, contexts), or a function")
