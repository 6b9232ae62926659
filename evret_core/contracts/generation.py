"""The generator contract: what a generator is asked (:class:`GenerationRequest`, with its :class:`Context` s) and
what it answers (:class:`Answer`, with its :class:`Claim` s); :class:`Generator` is the base of the ``generator``
kind (hook ``register_generators``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


@dataclass(frozen=True)
class Context:
    """One document handed to a generator: its id (what citations name) and its text."""

    doc_id: str
    text: str


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
