"""``llm-score``: an LLM grades each record from 1 to 5 through a prompt template over the record's fields."""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from pydantic import BaseModel, Field, field_validator

from evret_core.contracts.errors import EvretError
from evret_core.contracts.output import OutputEvaluator, OutputResults
from evret_core.contracts.provider import LLMProvider
from evret_core.llm.cache import resolve_cache
from evret_core.llm.client import LLMClient, run_all
from evret_core.llm.fencing import fence, fence_notice, format_field, new_nonce
from evret_core.llm.settings import LLMSettings
from evret_core.llm.structured import Structured, answer_int, structured_call

DEFAULT_MAX_TRIES = 3

RAG_RELEVANCE_TEMPLATE = """\
You are grading the answer of a retrieval-augmented generation (RAG) system.

Question:
{input}

Retrieved context:
{context}

Answer:
{output}

How relevant is the answer to the question, given the retrieved context? Judge whether it addresses what was \
asked and stays grounded in the context:
1 = irrelevant or contradicts the context; 2 = mostly off-topic or unsupported; 3 = partly answers, with gaps or \
unsupported claims; 4 = relevant and supported, minor gaps; 5 = fully answers the question, grounded in the context."""

BUILTIN_TEMPLATES: dict[str, str] = {"rag-relevance": RAG_RELEVANCE_TEMPLATE}

SYSTEM_PROMPT = (
    "You are a careful, impartial evaluator. Reply with only a JSON object of the form "
    '{"score": <integer from 1 to 5>, "reasoning": "<one or two sentences>"} and nothing else.'
)


def template_fields(template: str, label: str = "the template") -> list[str]:
    """The record fields a template reads, in order of first use. Placeholders must be plain field names
    (``{input}``): a format spec, a conversion, an index or an attribute is an :class:`EvretError` naming
    ``label``, since ``{input:>99999999999}`` or ``{meta[note]}`` would run arbitrary formatting on record data."""
    fields: list[str] = []
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise EvretError(f"evaluator 'llm-score': option 'template' ({label}) is not a valid template: {exc}"
                         ) from None
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        if not name.isidentifier() or spec or conversion:
            shown = "{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
            raise EvretError(f"evaluator 'llm-score': option 'template' ({label}): placeholder {shown} must name "
                             "a record field, e.g. {input}, with no format spec, conversion, index or attribute; "
                             "write literal braces as {{ and }}")
        if name not in fields:
            fields.append(name)
    return fields


class ScoreAnswer(BaseModel):
    """The JSON the model must answer with: a score from 1 to 5 and why."""

    # the range in the JSON Schema too, so that a provider which constrains its output keeps it
    score: int = Field(json_schema_extra={"minimum": 1, "maximum": 5})
    reasoning: str

    @field_validator("score", mode="before")
    @classmethod
    def _score(cls, value: object) -> int:
        return answer_int(value, "score", 1, 5)

    @field_validator("reasoning", mode="before")
    @classmethod
    def _reasoning(cls, value: object) -> str:
        if not isinstance(value, str):
            raise ValueError("'reasoning' must be a string explaining the score")
        return value


class LLMScoreEvaluator(OutputEvaluator):
    """Scores each record 1..5 with an LLM and normalises to 0..1 as ``(score - 1) / 4``.

    ``template`` is a built-in name (``rag-relevance``) or a template over the record's fields with plain
    placeholders (``{input}``); every placeholder must exist in every record, checked before any call. LLM options
    are those of :class:`~evret_core.llm.settings.LLMSettings` (by name, or ``settings=``). A malformed answer is sent back with
    the parse error, up to ``max_tries`` answers; then the record is unmeasured and reported. Usable answers go
    to the persistent judgment cache (``cache=``, as for the ``llm`` judge) as they arrive.
    """

    name = "llm-score"
    needs_target = False

    def __init__(
        self,
        template: str = "rag-relevance",
        provider: str | LLMProvider | None = None,
        model: str | None = None,
        *,
        max_tries: int = DEFAULT_MAX_TRIES,
        settings: LLMSettings | None = None,
        **options: Any,
    ) -> None:
        if not isinstance(template, str) or not template.strip():
            raise EvretError("evaluator 'llm-score': option 'template' must be a template string or a built-in "
                             f"name ({', '.join(BUILTIN_TEMPLATES)})")
        if isinstance(max_tries, bool) or not isinstance(max_tries, int) or not 1 <= max_tries <= 100:
            raise EvretError(f"evaluator 'llm-score': option 'max_tries' must be an integer from 1 to 100, "
                             f"got {max_tries!r}")
        self.template_name = template if template in BUILTIN_TEMPLATES else None
        self.template = BUILTIN_TEMPLATES.get(template, template)
        label = f"built-in {self.template_name!r}" if self.template_name else "the custom template"
        self.fields = template_fields(self.template, label)
        if not self.fields:
            raise EvretError(f"evaluator 'llm-score': option 'template' ({label}) has no placeholder; it must "
                             "show the model at least {output}")
        given = {k: v for k, v in (("provider", provider), ("model", model)) if v is not None}
        self.settings = LLMSettings.build("evaluator 'llm-score'", settings, **given, **options)
        self.provider = self.settings.make_provider("evaluator 'llm-score'")
        self.client = LLMClient(self.provider, self.settings, cache=resolve_cache(self.settings.cache),
                                label=self.name)
        self.max_tries = max_tries
        self.temperature = self.settings.temperature

    def validate(self, records: Sequence[Mapping[str, Any]]) -> None:
        super().validate(records)
        for i, record in enumerate(records):
            missing = [f for f in self.fields if record.get(f) is None]
            if missing:
                names = ", ".join(f"{{{f}}}" for f in missing)
                raise EvretError(f"record {i + 1}: the llm-score template reads {names}, and the record has no "
                                 f"such field (fields: {', '.join(sorted(record)) or 'none'})")

    def render(self, record: Mapping[str, Any], nonce: str) -> str:
        """The user message: each field formatted as text, then fenced as data, then put in the template."""
        fenced = {f: fence(f, format_field(record[f]), nonce, self.fields) for f in self.fields}
        return self.template.format_map(fenced)

    async def _score_one(self, record: Mapping[str, Any], nonce: str) -> Structured[ScoreAnswer]:
        extra = {"system": SYSTEM_PROMPT, "template": self.template, "fields": {f: record[f] for f in self.fields}}
        return await structured_call(self.client, system=SYSTEM_PROMPT + fence_notice(nonce),
                                     prompt=self.render(record, nonce), schema=ScoreAnswer,
                                     repairs=self.max_tries - 1, cache_key_extra=extra)

    def score_records(self, records: Sequence[Mapping[str, Any]]) -> tuple[list[float | None], list[dict[str, Any]]]:
        nonce = new_nonce()  # one code per run; a record's text cannot know it
        self._cache_hits = 0
        outcomes = run_all([self._score_one(r, nonce) for r in records], close=self.provider)
        scores: list[float | None] = []
        details: list[dict[str, Any]] = []
        for outcome in outcomes:
            self._cache_hits += outcome.cached
            if outcome.value is None:
                scores.append(None)
                details.append({"error": outcome.unmeasured, "tries": outcome.tries})
            else:
                scores.append((outcome.value.score - 1) / 4)
                details.append({"raw_score": outcome.value.score, "reasoning": outcome.value.reasoning,
                                "tries": outcome.tries})
        return scores, details

    def usage(self) -> dict[str, Any]:
        """Calls, tokens, retries and cache hits of the last run."""
        cache = self.client.cache
        return {**self.client.usage.to_dict(), "cache_hits": getattr(self, "_cache_hits", 0),
                "cache": None if cache is None else str(cache.path),
                **({"cache_read_only": True} if cache is not None and cache.read_only else {})}

    def evaluate(self, records: Sequence[Mapping[str, Any]]) -> OutputResults:
        return replace(super().evaluate(records), stats={"llm": self.usage()})

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "template": self.template_name or self.template, **self.provider.config()}
