"""Generators: turn a question and its contexts into an answer with claims, citations and a refusal flag.

A generator implements ``batch_generate(requests) -> list[Answer | None]`` (``None``: the answer could not be made,
reported as unmeasured). Subclass :class:`Generator` and implement :meth:`Generator.generate`, or hand the harness
a function ``(question, contexts) -> str | dict | Answer``, an object with ``generate``, or precomputed answers
(:class:`PrecomputedGenerator`). Registered generators (``extractive``, ``llm``) come from the
``register_generators`` hook. For a turn of a conversation the request carries the earlier messages
(``GenerationRequest.history``): the ``llm`` generator puts them in its prompt; precomputed answers, the
``extractive`` generator and a function of ``(question, contexts)`` ignore them (a function of one argument gets the
whole request, history included).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from evret_core.contracts.errors import EvretError
from evret_core.contracts.generation import Answer, Claim, Context, GenerationRequest, Generator
from evret_core.io.jsonio import iter_json_lines
from evret_core.rag.questions.conditions import BUILTIN_CONDITIONS
from evret_core.rag.questions.question_sets import QuestionSet


def coerce_answer(raw: Any, where: str) -> Answer | None:
    """An :class:`Answer` from what a user's pipeline returned: an Answer, a string, a dict with Answer's fields
    (``answer`` is accepted for ``text``; a claim may be a string), or None (unmeasured). A refused, escalated or
    clarifying answer with claims, one both clarifying and refused or escalated, and a blank claim, are errors
    naming ``where`` (see :func:`check_answer`)."""
    if raw is None:
        return None
    if isinstance(raw, Answer):
        return check_answer(raw, where)
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
        return check_answer(answer_from_mapping(data, where), where)
    raise EvretError(f"{where}: returned a {type(raw).__name__}; return a string, a dict or an Answer")


_ANSWER_FIELDS = tuple(f.name for f in fields(Answer))


def answer_from_mapping(data: Mapping[str, Any], where: str) -> Answer:
    """``Answer(**data)``, or an error naming ``where`` and the field (``claims.0.text: expected a string ...``)."""
    unknown = [k for k in data if k not in _ANSWER_FIELDS]
    if unknown:
        raise EvretError(f"{where}: {unknown[0]}: not a field of an answer (its fields: {', '.join(_ANSWER_FIELDS)})")
    try:
        return Answer(**data)
    except (TypeError, ValueError) as exc:
        raise EvretError(f"{where}: {exc}") from None


def check_answer(answer: Answer, where: str) -> Answer:
    """``answer`` if it is consistent, else an error naming ``where``: a refusal, an escalation or a clarifying
    question makes no claims (it would be scored as refused and as grounded at once), an answer that asks the user
    back neither refuses nor escalates (it would be one behaviour and another at once), and a claim is a non-blank
    statement (a blank one would be judged unsupported). A refusal's ``text`` is its message to the user, a
    clarifying answer's its question: neither scored nor split into claims."""
    if answer.clarified and (answer.refused or answer.escalated):
        what = "refused" if answer.refused else "escalated"
        raise EvretError(f"{where}: an answer is either 'clarified' (it asks the user which one they mean) or "
                         f"'{what}', not both")
    if (answer.refused or answer.escalated or answer.clarified) and answer.claims:
        what = "clarified" if answer.clarified else "refused" if answer.refused else "escalated"
        raise EvretError(f"{where}: a {what} answer makes no claims, but this one has {len(answer.claims)}; give "
                         f"either '{what}': true or the claims")
    blank = next((i for i, c in enumerate(answer.claims) if not c.text.strip()), None)
    if blank is not None:
        raise EvretError(f"{where}: claims[{blank}] is empty; a claim is a statement to check against the contexts")
    return answer


def drop_unknown_citations(answer: Answer, contexts: Sequence[Context]) -> tuple[Answer, int]:
    """``answer`` with each claim's citations limited to the ids of ``contexts`` (in order, without repeats), and
    the number of citations dropped, also kept in ``metadata["dropped_citations"]``: citation scores credit only
    what the generator was shown."""
    known = {c.doc_id for c in contexts}
    dropped = sum(i not in known for claim in answer.claims for i in claim.citations)
    claims = [Claim(text=c.text, citations=[i for i in dict.fromkeys(c.citations) if i in known])
              for c in answer.claims]
    if not dropped and claims == answer.claims:
        return answer, 0
    metadata = {**answer.metadata, "dropped_citations": dropped} if dropped else answer.metadata
    return replace(answer, claims=claims, metadata=metadata), dropped


class CallableGenerator(Generator):
    """A user's function ``fn(question, contexts)`` (contexts: a list of :class:`Context`; a turn's history is not
    passed), or ``fn(request)`` when it takes one argument (the request, ``history`` included)."""

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
    """Answers made elsewhere, looked up by question id and condition (a turn's history is not consulted: the
    answer was made with whatever history the system had).

    Keys are ``(question_id, condition)``; a key with condition ``None`` answers every condition of that question.
    A request with no answer is unmeasured. As with the ``llm`` generator, a citation of an id that is not among
    the request's contexts is dropped and counted (``dropped_citations`` in the answer's metadata and in
    :meth:`stats`). Before the run, an answer for a question that is not in the question set, or under a condition
    that is neither the run's nor a known one (a typo), is an error naming its line (:meth:`check_inputs`).
    ``lines``: key -> "file:line", for those errors.
    """

    name = "precomputed"

    def __init__(self, answers: Mapping[tuple[str, str | None], Answer], source: str = "<answers>",
                 lines: Mapping[tuple[str, str | None], str] | None = None) -> None:
        self.answers = dict(answers)
        self.source = source
        self.lines = dict(lines or {})
        self.dropped_citations = 0

    def generate(self, request: GenerationRequest) -> Answer | None:
        found = self.answers.get((request.question_id, request.condition))
        if found is None:
            found = self.answers.get((request.question_id, None))
        if found is None:
            return None
        answer, dropped = drop_unknown_citations(found, request.contexts)
        self.dropped_citations += dropped
        return answer

    def reset_stats(self) -> None:
        self.dropped_citations = 0

    def stats(self) -> dict[str, Any]:
        return {"dropped_citations": self.dropped_citations}

    def check_inputs(self, questions: QuestionSet, conditions: Sequence[str]) -> None:
        """Every answer must be for a question of ``questions``, under one of ``conditions``, a built-in condition
        or a registered adversarial family (answers for conditions this run does not have are not used)."""
        from evret_core.plugins.registry import perturbation_names

        def where(key: tuple[str, str | None]) -> str:
            return self.lines.get(key) or f"{self.source}: the answer for {key[0]!r}"

        known = {q.question_id for q in questions.questions}
        strays = [key for key in self.answers if key[0] not in known]
        if strays:
            more = f" ({len(strays)} such answers)" if len(strays) > 1 else ""
            raise EvretError(f"{where(strays[0])}: an answer for question {strays[0][0]!r}, which is not in the "
                             f"question set{more}")
        names = [*conditions, *(c for c in (*BUILTIN_CONDITIONS, *perturbation_names()) if c not in conditions)]
        for key in self.answers:
            if key[1] is not None and key[1] not in names:
                raise EvretError(f"{where(key)}: unknown condition {key[1]!r}; this run's conditions are "
                                 f"{', '.join(conditions)} (known: {', '.join(names)}), or leave 'condition' out "
                                 f"for an answer that serves every condition")

    @classmethod
    def from_jsonl(cls, path: str | Path) -> PrecomputedGenerator:
        """One answer per line: ``question_id``, optional ``condition``, and the answer (``text`` or ``answer``,
        ``claims`` with ``text`` and ``citations``, ``refused``, ``escalated``, ``clarified``: it asked the user which
        one they mean, ``text`` its question). Errors name the file and line."""
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
        return cls(answers, str(path), lines)

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "source": self.source, "answers": len(self.answers)}


def is_answers_file(name: str | Path) -> bool:
    """Whether a generator given by name is a precomputed answers file: a ``.jsonl`` suffix, in any case."""
    return str(name).lower().endswith(".jsonl")


def resolve_generator(obj: Any, options: Mapping[str, Any] | None = None) -> Any:
    """Something with ``batch_generate`` from a registered name (built with ``options``), a path to a ``.jsonl``
    answers file, a :class:`Generator`, an object with ``generate``, or a function."""
    options = dict(options or {})
    if obj is None:
        raise EvretError("no generator given")
    if isinstance(obj, (str, Path)):
        text = str(obj)
        if is_answers_file(text):
            if options:
                raise EvretError(f"generator {text}: a precomputed answers file takes no options")
            return PrecomputedGenerator.from_jsonl(text)
        from evret_core.plugins.registry import create_generator, generator_names

        if text not in generator_names() and Path(text).exists():
            suffix = Path(text).suffix
            raise EvretError(f"generator {text}: a file of precomputed answers must be JSON Lines named *.jsonl "
                             f"(one answer per line), not {repr(suffix) if suffix else 'a name without a suffix'}; "
                             f"registered generators: {', '.join(generator_names())}")
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
