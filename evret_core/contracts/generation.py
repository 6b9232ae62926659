"""The generator contract: what a generator is asked (:class:`GenerationRequest`, with its :class:`Context` s) and
what it answers (:class:`Answer`, with its :class:`Claim` s); :class:`Generator` is the base of the ``generator``
kind (hook ``register_generators``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import field
from typing import Any

from evret_core.contracts.conversation import Turn
from evret_core.contracts.values import Value, as_bool, as_dict, as_list, as_str, as_str_list, value_type


@value_type
class Context(Value):
    """One document handed to a generator: its id (what citations name) and its text."""

    doc_id: str
    text: str


@value_type(kw_only=True)
class Claim(Value):
    """One statement of an answer and the context ids it cites (any list-like of strings, kept as a list)."""

    __pydantic_config__ = {"extra": "forbid"}  # inside a results file (``ConditionOutcome.answer``): no unknown key

    text: str
    citations: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", as_str(self.text, "text"))
        object.__setattr__(self, "citations", as_str_list(self.citations, "citations"))


@value_type(kw_only=True)
class Answer(Value):
    """A generator's answer. ``refused``: it declined to answer; ``escalated``: it handed the question to a person;
    ``clarified``: it asked the user which of several readings they meant (``text`` is that question).
    ``claims`` empty means the judge splits ``text`` into sentence claims without citations; a claim may be given
    as a mapping of :class:`Claim`'s fields. The field order is the key order of the answer in a results file."""

    __pydantic_config__ = {"extra": "forbid"}  # inside a results file (``ConditionOutcome.answer``): no unknown key

    text: str = ""
    claims: list[Claim] = field(default_factory=list)
    refused: bool = False
    escalated: bool = False
    clarified: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", as_str(self.text, "text"))
        object.__setattr__(self, "claims", as_list(self.claims, "claims", _claim))
        object.__setattr__(self, "refused", as_bool(self.refused, "refused"))
        object.__setattr__(self, "escalated", as_bool(self.escalated, "escalated"))
        object.__setattr__(self, "clarified", as_bool(self.clarified, "clarified"))
        object.__setattr__(self, "metadata", as_dict(self.metadata, "metadata"))


_CLAIM_FIELDS = ("text", "citations")


def _claim(value: Any, where: str) -> Claim:
    """A claim of an answer: a :class:`Claim` as it is, or a mapping of its fields."""
    if isinstance(value, Claim):
        return value
    if not isinstance(value, Mapping):
        raise TypeError(f"{where}: expected a claim (a Claim or a mapping), got {type(value).__name__}")
    unknown = [k for k in value if k not in _CLAIM_FIELDS]
    if unknown:
        raise TypeError(f"{where}.{unknown[0]}: not a field of a claim")
    if "text" not in value:
        raise TypeError(f"{where}.text: missing")
    try:
        return Claim(**value)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"{where}.{exc}") from None


@value_type
class GenerationRequest(Value):
    """What a generator is asked: the question under one condition, with that condition's contexts. ``history``:
    for a turn of a conversation, the messages before it, oldest first (empty for a single question)."""

    question_id: str
    question: str
    contexts: tuple[Context, ...]
    condition: str
    history: tuple[Turn, ...] = ()


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
