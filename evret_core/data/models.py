"""The value types retrievers and judges exchange: :class:`RetrievalResult` (one retrieved document, as a retriever
returns it) and :class:`JudgmentContext` (what a judge sees for one query and one retrieved text)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["JudgmentContext", "RetrievalResult"]


class RetrievalResult(BaseModel):
    """One retrieved document: its id, the retriever's score and metadata; the text is ``metadata["text"]``."""

    # numeric ids become strings without a Python-level validator: retrievers build many of these
    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True)

    doc_id: str
    score: float = 0.0
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def text(self) -> str | None:
        """The retrieved document's text, or None when the retriever gave none."""
        value = self.metadata.get("text")
        return None if value is None else str(value)


class JudgmentContext(BaseModel):
    """What a judge sees: the query, one expected answer text (with its other acceptable strings, ``aliases``)
    and one retrieved text. A judge says "match" when the expected text or any alias matches."""

    model_config = ConfigDict(frozen=True)

    query: str
    expected_text: str
    retrieved_text: str
    aliases: tuple[str, ...] = ()

    @property
    def expected_variants(self) -> tuple[str, ...]:
        """Every acceptable string of the expected answer: ``(expected_text, *aliases)``."""
        return (self.expected_text, *self.aliases)
