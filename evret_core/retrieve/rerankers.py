"""The built-in reranker ``llm``: pointwise LLM reranking over any registered provider.

Each (query, candidate text) pair is graded 0-3 for relevance (0 irrelevant, 1 related, 2 relevant, 3 highly
relevant: answers the query) through :func:`~evret_core.llm.structured.structured_call`, and the grade is the
candidate's score; ties, frequent on a 4-point scale, keep the first stage's order (the contract's rule,
:class:`~evret_core.contracts.rerank.Reranker`). The prompt is one option (``prompt``: a template with ``{query}``
and ``{document}``, each replaced by its text fenced as data); the system message and the answer's schema are
fixed. Every answer goes to the LLM client's persistent cache as it arrives (keyed by the prompt, the query and the
text, never the random fence code), so a rerun, or a run killed half way, pays only for what it has not asked. A
pair the model could not grade (its call failed after the retries, or no valid answer after ``max_tries``) is
*ungraded*: score -1, below every grade, counted in :meth:`LLMReranker.stats`, never guessed.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, field_validator

from evret_core.contracts.errors import EvretError
from evret_core.contracts.provider import LLMProvider
from evret_core.contracts.rerank import Reranker
from evret_core.contracts.retrieve import RankedColumns
from evret_core.llm.cache import resolve_cache
from evret_core.llm.client import LLMClient, run_all
from evret_core.llm.fencing import fence, fence_notice, new_nonce
from evret_core.llm.settings import LLMSettings
from evret_core.llm.structured import Structured, answer_int, structured_call

if TYPE_CHECKING:
    import numpy as np

__all__ = ["DEFAULT_PROMPT", "GRADES", "UNGRADED", "LLMReranker"]

GRADES = 3
"""The top of the relevance scale (grades 0 to 3)."""
UNGRADED = -1.0
"""The score of a pair the model could not grade: below every grade."""

SYSTEM_PROMPT = (
    "You grade how relevant a document is to a search query, for reranking search results. Grades: "
    "0 = irrelevant; 1 = on the topic but does not help answer the query; 2 = relevant, partly answers it; "
    "3 = highly relevant, answers the query. Reply with only a JSON object {\"grade\": <0, 1, 2 or 3>}."
)

DEFAULT_PROMPT = "Query:\n{query}\n\nDocument:\n{document}\n\nHow relevant is the document to the query?"
"""The default user message; ``prompt=`` replaces it (a template with ``{query}`` and ``{document}``)."""

_FIELDS = ("query", "document")


class GradeAnswer(BaseModel):
    """The JSON the model answers with: a grade from 0 to 3."""

    grade: int = Field(json_schema_extra={"minimum": 0, "maximum": GRADES})

    @field_validator("grade", mode="before")
    @classmethod
    def _grade(cls, value: object) -> int:
        return answer_int(value, "grade", 0, GRADES)


def _check_prompt(prompt: Any) -> str:
    """The ``prompt`` option: a template whose placeholders are exactly ``{query}`` and ``{document}``."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise EvretError("reranker 'llm': option 'prompt' must be a template with {query} and {document}")
    try:
        parsed = [(name, spec, conv) for _, name, spec, conv in string.Formatter().parse(prompt) if name is not None]
    except ValueError as exc:
        raise EvretError(f"reranker 'llm': option 'prompt' is not a valid template: {exc}") from None
    names = [name for name, spec, conv in parsed]
    if any(spec or conv for _, spec, conv in parsed):
        raise EvretError("reranker 'llm': option 'prompt': write the fields as plain {query} and {document}, "
                         "with no format spec or conversion")
    unknown = sorted({n for n in names if n not in _FIELDS})
    if unknown:
        raise EvretError(f"reranker 'llm': option 'prompt': placeholder {{{unknown[0]}}} is not a field; the fields "
                         "are {query} and {document} (write literal braces as {{ and }})")
    missing = [f for f in _FIELDS if f not in names]
    if missing:
        raise EvretError(f"reranker 'llm': option 'prompt' must contain {{{missing[0]}}}")
    return prompt


class LLMReranker(Reranker):
    """Grades each (query, candidate) pair 0-3 with an LLM; the grade is the score.

    Options are those of :class:`~evret_core.llm.settings.LLMSettings` (``provider``, ``model``, ``cache``,
    ``max_concurrency``...), plus ``prompt`` (the user message template) and ``max_tries`` (answers asked for
    before a pair is ungraded). A pair repeated within one call (the same text under two ids, or two queries with
    the same candidate) is asked once.
    """

    name = "llm"

    def __init__(
        self,
        provider: str | LLMProvider | None = None,
        model: str | None = None,
        *,
        prompt: str = DEFAULT_PROMPT,
        max_tries: int = 3,
        settings: LLMSettings | None = None,
        **options: Any,
    ) -> None:
        self.prompt = _check_prompt(prompt)
        if isinstance(max_tries, bool) or not isinstance(max_tries, int) or not 1 <= max_tries <= 100:
            raise EvretError(f"reranker 'llm': option 'max_tries' must be an integer from 1 to 100, got {max_tries!r}")
        self.max_tries = max_tries
        given = {k: v for k, v in (("provider", provider), ("model", model)) if v is not None}
        self.settings = LLMSettings.build("reranker 'llm'", settings, **given, **options)
        self.settings.default_model()  # an uninstalled provider is an error now, before any candidate is read
        self.cache = resolve_cache(self.settings.cache)
        self._provider: LLMProvider | None = None
        self._client: LLMClient | None = None
        self.reset_stats()

    @property
    def provider(self) -> LLMProvider:
        """The provider object, built on first use."""
        if self._provider is None:
            self._provider = self.settings.make_provider("reranker 'llm'")
        return self._provider

    @property
    def client(self) -> LLMClient:
        if self._client is None:
            self._client = LLMClient(self.provider, self.settings, cache=self.cache, label=f"reranker-{self.name}")
        return self._client

    def batch_score(self, queries: Sequence[str],
                    candidates: Sequence[RankedColumns]) -> Sequence[Sequence[float] | np.ndarray]:
        pairs: dict[tuple[str, str], None] = {}
        for query, columns in zip(queries, candidates, strict=True):
            texts = () if columns.texts is None else columns.texts
            pairs.update(dict.fromkeys((query, str(text)) for text in texts))
        distinct = list(pairs)
        nonce = new_nonce()  # one code per call: no candidate's text can know it
        client = self.client
        outcomes = run_all([self._grade(client, query, text, nonce) for query, text in distinct], close=self.provider)
        grades: dict[tuple[str, str], float] = {}
        for pair, outcome in zip(distinct, outcomes, strict=True):
            self._counts["pairs"] += 1
            self._counts["cache_hits"] += int(outcome.cached)
            if outcome.value is None:
                self._counts["ungraded"] += 1
                grades[pair] = UNGRADED
            else:
                grades[pair] = float(outcome.value.grade)
        return [[grades[(query, str(text))] for text in (() if columns.texts is None else columns.texts)]
                for query, columns in zip(queries, candidates, strict=True)]

    async def _grade(self, client: LLMClient, query: str, text: str, nonce: str) -> Structured[GradeAnswer]:
        user = self.prompt.format(query=fence("query", query, nonce, _FIELDS),
                                  document=fence("document", text, nonce, _FIELDS))
        extra = {"reranker": self.name, "system": SYSTEM_PROMPT, "prompt": self.prompt, "query": query,
                 "document": text}
        return await structured_call(client, system=SYSTEM_PROMPT + fence_notice(nonce, "document"), prompt=user,
                                     schema=GradeAnswer, repairs=self.max_tries - 1, cache_key_extra=extra)

    def config(self) -> dict[str, Any]:
        provider = self.settings.provider_name
        return {"name": self.name, "provider": provider, "model": self.settings.default_model(),
                "temperature": self.settings.temperature, "prompt": self.prompt, "grades": GRADES,
                "max_tries": self.max_tries}

    def reset_stats(self) -> None:
        self._counts = {"pairs": 0, "cache_hits": 0, "ungraded": 0}

    def stats(self) -> dict[str, Any]:
        """Since the last reset: distinct pairs graded, answers read from the cache, pairs left ungraded (score
        -1), and the client's calls and tokens."""
        usage = self._client.usage.to_dict() if self._client is not None else {}
        return {**self._counts, "llm": usage}
