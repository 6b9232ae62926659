"""``llm-score``: an LLM grades each record from 1 to 5 through a prompt template over the record's fields."""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from typing import Any

from evret_core.errors import EvretError
from evret_core.evaluators.llm_support import (
    DEFAULT_MAX_TRIES,
    AnswerError,
    Completer,
    Outcome,
    fence,
    fence_notice,
    format_field,
    new_nonce,
    parse_json_object,
    structured_call,
)
from evret_core.evaluators.output import OutputEvaluator, OutputResults
from evret_core.llm import ChatMessage, LLMProvider

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


def template_fields(template: str) -> list[str]:
    """The record fields a ``str.format`` template reads, in order of first use (``{a.b}`` reads ``a``)."""
    fields: list[str] = []
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise EvretError(f"evaluator 'llm-score': option 'template' is not a valid template: {exc}") from None
    for _, name, _, _ in parsed:
        if name is None:
            continue
        root = name.split(".", 1)[0].split("[", 1)[0]
        if not root or root.isdigit():
            raise EvretError(f"evaluator 'llm-score': template placeholder {{{name}}} must name a record field, "
                             "e.g. {input}; write literal braces as {{ and }}")
        if root not in fields:
            fields.append(root)
    return fields


def parse_score(text: str) -> tuple[int, str]:
    """``(score, reasoning)`` from an answer ``{"score": 1..5, "reasoning": "..."}``; :class:`AnswerError` if not."""
    data = parse_json_object(text)
    score = data.get("score")
    if isinstance(score, float) and score.is_integer():
        score = int(score)
    if isinstance(score, bool) or not isinstance(score, int):
        raise AnswerError(f"'score' must be an integer from 1 to 5, got {score!r}")
    if not 1 <= score <= 5:
        raise AnswerError(f"'score' must be an integer from 1 to 5, got {score}")
    reasoning = data.get("reasoning")
    if not isinstance(reasoning, str):
        raise AnswerError("'reasoning' must be a string explaining the score")
    return score, reasoning


class LLMScoreEvaluator(OutputEvaluator):
    """Scores each record 1..5 with an LLM and normalises to 0..1 as ``(score - 1) / 4``.

    ``template`` is a built-in name (``rag-relevance``) or a ``str.format`` template over the record's fields;
    every placeholder must exist in every record, checked before any call. A malformed answer is sent back with
    the parse error, up to ``max_tries`` answers; then the record is unmeasured and reported. Usable answers go
    to the persistent judgment cache (``cache=``, as for the ``llm`` judge) as they arrive.
    """

    name = "llm-score"
    needs_target = False

    def __init__(
        self,
        template: str = "rag-relevance",
        provider: str | LLMProvider = "openai",
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        provider_options: Mapping[str, Any] | None = None,
        max_tries: int = DEFAULT_MAX_TRIES,
        temperature: float = 0.0,
        max_concurrency: int = 8,
        requests_per_minute: float | None = None,
        cache: Any = None,
    ) -> None:
        if not isinstance(template, str) or not template.strip():
            raise EvretError("evaluator 'llm-score': option 'template' must be a template string or a built-in "
                             f"name ({', '.join(BUILTIN_TEMPLATES)})")
        if not isinstance(max_tries, int) or max_tries < 1:
            raise EvretError(f"evaluator 'llm-score': option 'max_tries' must be a positive integer, got {max_tries!r}")
        self.template_name = template if template in BUILTIN_TEMPLATES else None
        self.template = BUILTIN_TEMPLATES.get(template, template)
        self.fields = template_fields(self.template)
        if not self.fields:
            raise EvretError("evaluator 'llm-score': the template has no placeholder; it must show the model at "
                             "least {output}")
        self.completer = Completer.for_provider(provider, model, base_url, api_key, provider_options,
                                                owner="evaluator 'llm-score'", judge=self.name,
                                                max_concurrency=max_concurrency,
                                                requests_per_minute=requests_per_minute, cache=cache)
        self.provider = self.completer.provider
        self.max_tries = max_tries
        self.temperature = float(temperature)

    def validate(self, records: Sequence[Mapping[str, Any]]) -> None:
        super().validate(records)
        for i, record in enumerate(records):
            missing = [f for f in self.fields if record.get(f) is None]
            if missing:
                names = ", ".join(f"{{{f}}}" for f in missing)
                raise EvretError(f"record {i + 1}: the llm-score template reads {names}, and the record has no "
                                 f"such field (fields: {', '.join(sorted(record)) or 'none'})")

    def render(self, record: Mapping[str, Any], nonce: str) -> str:
        """The user message: the template with each field's text fenced as data."""
        return self.template.format_map({f: fence(f, format_field(record[f]), nonce) for f in self.fields})

    async def _score_one(self, record: Mapping[str, Any], nonce: str) -> Outcome[tuple[int, str]]:
        messages = [ChatMessage("system", SYSTEM_PROMPT + fence_notice(nonce)),
                    ChatMessage("user", self.render(record, nonce))]
        payload = {"system": SYSTEM_PROMPT, "template": self.template, "fields": {f: record[f] for f in self.fields}}
        return await structured_call(self.completer, messages, parse_score, temperature=self.temperature,
                                     max_tries=self.max_tries, cache_payload=payload)

    def score_records(self, records: Sequence[Mapping[str, Any]]) -> tuple[list[float | None], list[dict[str, Any]]]:
        nonce = new_nonce()  # one code per run; a record's text cannot know it
        outcomes = self.completer.run([self._score_one(r, nonce) for r in records])
        scores: list[float | None] = []
        details: list[dict[str, Any]] = []
        for outcome in outcomes:
            if outcome.value is None:
                scores.append(None)
                details.append({"error": outcome.error, "tries": outcome.tries})
            else:
                raw, reasoning = outcome.value
                scores.append((raw - 1) / 4)
                details.append({"raw_score": raw, "reasoning": reasoning, "tries": outcome.tries})
        return scores, details

    def evaluate(self, records: Sequence[Mapping[str, Any]]) -> OutputResults:
        results = super().evaluate(records)
        results.stats = {"llm": self.completer.usage()}
        return results

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "template": self.template_name or self.template, **self.provider.config()}
