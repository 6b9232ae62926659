"""Constrained decoding on a random tiny model: free text never parses, constrained answers always parse and
validate, for every schema the project's LLM parts ask for, over prompts, temperatures, seeds and budgets."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from evret_transformers.grammar import JsonGrammar, SchemaNotSupported
from evret_transformers.provider import TransformersProvider
from pydantic import BaseModel

from evret_core.criteria.direct import DirectAnswer
from evret_core.criteria.pairwise import PairwiseAnswer
from evret_core.llm.client import LLMClient
from evret_core.llm.settings import LLMSettings
from evret_core.llm.structured import structured_call
from evret_core.rag.claims.llm_judge import ClaimCheck, ExtractedClaims
from evret_core.rag.generate.llm_generator import GeneratedAnswer
from evret_core.rag.scores.relevance import RelevanceGrade
from evret_core.scoring.llm_score import ScoreAnswer
from evret_core.testsets.testset import ClosedBookAnswer, GeneratedQA, GeneratedUnanswerable

# every schema an Evret LLM part passes to structured_call
PROJECT_SCHEMAS: list[type[BaseModel]] = [GeneratedAnswer, ExtractedClaims, ClaimCheck, RelevanceGrade, ScoreAnswer,
                                          DirectAnswer, PairwiseAnswer, GeneratedQA, GeneratedUnanswerable,
                                          ClosedBookAnswer]
PROMPTS = ["Grade the answer: the queen lays two thousand eggs.", "Which claims does the passage support?",
           "Compare the responses and say which is better."]
RUNS = [(0, 0.0), (1, 0.0), (2, 0.0), (0, 1.0), (1, 1.3), (2, 0.7)]  # (prompt, temperature); seed = prompt index


def ask(provider: TransformersProvider, schema: type[BaseModel], prompt: str, temperature: float,
        seed: int) -> Any:
    provider.seed = seed
    client = LLMClient(provider, LLMSettings(provider=provider, temperature=temperature), label="test")
    return asyncio.run(structured_call(client, system="Answer in JSON.", prompt=prompt, schema=schema, repairs=0))


@pytest.mark.parametrize("schema", PROJECT_SCHEMAS, ids=lambda s: s.__name__)
def test_constrained_answers_always_parse_and_validate(tiny_model: Path, schema: type[BaseModel]) -> None:
    provider = TransformersProvider(str(tiny_model), max_new_tokens=64)
    for prompt, temperature in RUNS:
        result = ask(provider, schema, PROMPTS[prompt], temperature, seed=prompt)
        assert result.value is not None, result.unmeasured
        assert result.tries == 1 and len(result.answers) == 1
        jsonschema.validate(json.loads(result.answers[0]), schema.model_json_schema())


def test_the_same_model_unconstrained_never_gives_usable_json(tiny_model: Path) -> None:
    """The control: the same calls with the constraint switched off (as any provider without it) fail."""
    provider = TransformersProvider(str(tiny_model), max_new_tokens=40)
    provider.constrains_json = False  # the client then sends the schema in the prompt only
    for schema in (ClaimCheck, ScoreAnswer, GeneratedAnswer):
        for prompt, temperature in RUNS:
            result = ask(provider, schema, PROMPTS[prompt], temperature, seed=prompt)
            assert result.value is None and "no usable answer" in str(result.unmeasured)
            assert result.answers and result.answers[0]  # it did answer: with noise


def test_a_short_budget_still_closes_the_json(tiny_model: Path) -> None:
    """With a budget of the fewest tokens the schema's shortest JSON needs, plus two, the decoder must close every
    string and array in time; with fewer, the call fails at once, naming the option."""
    from evret_transformers import runtime

    provider = TransformersProvider(str(tiny_model))
    rules = runtime.constraint(runtime.load(provider.source, "auto", "auto"), GeneratedAnswer.model_json_schema())
    shortest = rules.grammar.cost(rules.grammar.initial())
    assert 10 < shortest <= len('{"answer":"","claims":[],"refused":false,"escalated":false}')
    for seed in range(4):
        tight = TransformersProvider(str(tiny_model), max_new_tokens=shortest + 2)
        result = ask(tight, GeneratedAnswer, PROMPTS[seed % 3], 1.0, seed=seed)
        assert result.value is not None, result.unmeasured
        assert 0 < result.usage.output_tokens <= shortest + 2
    too_few = TransformersProvider(str(tiny_model), max_new_tokens=shortest - 1)
    result = ask(too_few, GeneratedAnswer, PROMPTS[0], 0.0, seed=0)
    assert result.value is None and f"max_new_tokens={shortest - 1} is too few" in str(result.unmeasured)


def test_the_grammar_accepts_exactly_the_schemas_json() -> None:
    grammar = JsonGrammar(ClaimCheck.model_json_schema())
    ok = '{"verdict":"contradicted","supporting_context_ids":["d\\"1\\u00e9"],"contradicting_context_ids":[]}'
    assert grammar.cost(grammar.advance(grammar.initial(), ok)) == 0
    for bad in ('{"verdict":"maybe"', '{"verdict":"supported","supporting_context_ids":[1]', '{ "verdict"',
                '{"verdict":"supported","supporting_context_ids":["a\nb"]'):
        assert not grammar.advance(grammar.initial(), bad), bad
    ranged = JsonGrammar(ScoreAnswer.model_json_schema())
    assert ranged.advance(ranged.initial(), '{"score":5,') and not ranged.advance(ranged.initial(), '{"score":6')
    pair = JsonGrammar(PairwiseAnswer.model_json_schema())
    assert not pair.advance(pair.initial(), '{"comparisons":[{"responses":[1,2,3')
    assert pair.advance(pair.initial(), '{"comparisons":[{"responses":[-1,20],')


@pytest.mark.parametrize("schema, keyword", [({"type": "string", "pattern": "^a"}, "pattern"),
                                             ({"type": "string", "format": "date"}, "format"),
                                             ({"$ref": "#/$defs/Missing"}, "Missing"),
                                             ({"type": "integer", "maximum": 10**6}, "integer bounds"),
                                             ({"allOf": [{"type": "string"}, {"minLength": 2}]}, "allOf")])
def test_schemas_it_cannot_keep_are_refused_not_ignored(schema: dict[str, Any], keyword: str) -> None:
    with pytest.raises(SchemaNotSupported, match=keyword):
        JsonGrammar({"type": "object", "properties": {"x": schema}, "$defs": {}})


def test_an_unsupported_schema_makes_the_call_unmeasured_with_the_reason(tiny_model: Path) -> None:
    class Dated(BaseModel):
        when: str

        model_config = {"json_schema_extra": {"properties": {"when": {"type": "string", "format": "date"}}}}

    result = ask(TransformersProvider(str(tiny_model), max_new_tokens=16), Dated, PROMPTS[0], 0.0, seed=0)
    assert result.value is None and "'format' is not supported" in str(result.unmeasured)


@pytest.mark.parametrize("schema", PROJECT_SCHEMAS, ids=lambda s: s.__name__)
def test_random_walks_through_the_grammar_are_valid_json(schema: type[BaseModel]) -> None:
    """Whatever characters a model picks among those the grammar allows, the result validates: 40 random walks
    per schema over a mixed alphabet, heading for the end once 60 characters are written."""
    import random

    grammar = JsonGrammar(schema.model_json_schema())
    alphabet = [chr(c) for c in range(32, 127)] + ["é", "\n", "\\", "\u2028", "日"]
    rng = random.Random(7)
    for _ in range(40):
        state, text = grammar.initial(), ""
        while grammar.cost(state) > 0:
            options = [(ch, after) for ch in alphabet if (after := grammar.advance(state, ch))]
            if len(text) > 60:  # finish: only characters that bring the end nearer
                options = [o for o in options if grammar.cost(o[1]) < grammar.cost(state)]
            ch, state = rng.choice(options)
            text += ch
        jsonschema.validate(json.loads(text), schema.model_json_schema())
        schema.model_validate_json(text)


# -- issue 33 (red-team F11, cases TS01-TS27): a schema is kept or refused, never answered against ----------------------
def _nested(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "boolean"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


# (case, schema, what the refusal names): each refused before the model is loaded, naming the keyword
REFUSED = [
    ("TS01", {"type": "string", "pattern": "^a"}, "'pattern'"),
    ("TS02", {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
              "maxProperties": 1}, "'maxProperties' 1"),
    ("TS03", {"enum": []}, "'enum' is empty"),
    ("TS04", {"anyOf": []}, "'anyOf' is empty"),
    ("TS05", {"type": "string", "minLength": 5, "maxLength": 2}, "unsatisfiable: 'minLength' 5 > 'maxLength' 2"),
    ("TS06", {"type": "array", "minItems": 3, "maxItems": 1}, "unsatisfiable: 'minItems' 3 > 'maxItems' 1"),
    ("TS08", _nested(3000), "nested deeper than 128 levels"),
    ("TS09", {"type": "number", "minimum": 5}, "number bounds"),
    ("TS10", {"type": "integer", "minimum": 0, "maximum": 10**12}, "integer bounds"),
    ("TS11", {"type": "string", "format": "date-time"}, "'format'"),
    ("TS12", {"type": "object", "properties": {"a": {"type": "boolean"}}, "required": ["a", "b"]},
     "'required' names 'b', which is not in 'properties'"),
    ("TS13", {"type": "object", "properties": {"a": {"type": "boolean"}}, "minProperties": 2},
     "'minProperties' 2"),
    ("TS16", {"$ref": "#/$defs/a", "$defs": {"a": {"type": "object", "properties": {"b": {"$ref": "#/$defs/b"}}},
                                             "b": {"type": "object", "properties": {"a": {"$ref": "#/$defs/a"}}}}},
     "recursive reference"),
    ("TS17", {"type": "string", "minLength": -5}, "'minLength' must be a non-negative integer"),
    ("TS18", {"type": "array", "maxItems": -1}, "'maxItems' must be a non-negative integer"),
    ("TS20", {"type": "date"}, "the type 'date'"),
    ("TS21", {"const": "x", "type": "integer"}, "'const' 'x' contradicts 'type' integer"),
    ("TS22", {"enum": [1, 2], "type": "string"}, "no value of 'enum' fits 'type' string"),
    ("TS25", {"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"type": "boolean"}},
              "dependencies": {"a": ["c"]}}, "'dependencies'"),
    ("TS26", {"type": "number", "exclusiveMaximum": 10}, "number bounds"),
    ("sibling-of-anyOf", {"anyOf": [{"type": "string"}, {"type": "null"}], "maxLength": 2},
     "'maxLength' beside 'anyOf'"),
    ("sibling-of-ref", {"$ref": "#/$defs/s", "$defs": {"s": {"type": "string"}}, "maxLength": 2},
     "'maxLength' beside '$ref'"),
    ("enum-beside-maxLength", {"enum": ["abc", "de"], "maxLength": 1}, "no value of 'enum' fits"),
    ("overlapping-oneOf", {"oneOf": [{"type": "number"}, {"type": "integer"}]}, "'oneOf'"),
    ("draft7-tuple-items", {"type": "array", "items": [{"type": "string"}]}, "'items' as a list"),
]

# (case, schema): answered, and the answer validates (jsonschema, Draft 2020-12 and Draft 7)
KEPT = [
    ("TS14", {"type": "object", "properties": {"s": {"type": "string", "maxLength": 3}}}),
    ("TS15", {"const": {"a": [1, 2], "b": None}}),
    ("TS19", {"type": "object", "properties": {"x": {"type": "boolean"}, "y": {"type": "null"},
                                               "z": {"enum": ["a", "b"]}}, "additionalProperties": False}),
    ("TS23", {"type": "array", "items": {"type": "boolean"}, "maxItems": 4, "maxContains": 2, "minContains": 1}),
    ("TS24", {"type": "object", "properties": {"a": {"type": "boolean"}}, "unevaluatedProperties": False}),
    ("maxProperties-kept", {"type": "object", "properties": {"a": {"type": "boolean"}}, "maxProperties": 1,
                            "minProperties": 1, "required": ["a"]}),
    ("enum-filtered-by-type", {"enum": ["a", 1, None, "bb"], "type": "string", "maxLength": 1}),
    ("const-matching-type", {"const": 3, "type": "integer", "minimum": 0}),
    ("disjoint-oneOf", {"oneOf": [{"type": "string", "maxLength": 2}, {"type": "boolean"}, {"const": 5}]}),
    ("nested-60", _nested(60)),
]


def test_schemas_it_cannot_keep_are_refused_before_the_model_is_loaded(tmp_path_factory: pytest.TempPathFactory
                                                                      ) -> None:
    from evret_transformers import runtime
    from evret_transformers.tiny import build_tiny_model

    from evret_core.contracts.provider import ChatMessage, LLMCallError

    folder = build_tiny_model(tmp_path_factory.mktemp("tiny-unloaded"), seed=3)
    provider = TransformersProvider(str(folder), max_new_tokens=32)
    for case, schema, named in REFUSED:
        with pytest.raises(LLMCallError) as info:
            asyncio.run(provider.acomplete([ChatMessage("user", "hi")], json_schema=schema))
        message = str(info.value)
        assert message.startswith("transformers: the JSON schema cannot be decoded under constraint: "), (case,
                                                                                                         message)
        assert named in message, (case, message)
        assert "max_new_tokens" not in message and not info.value.retryable, (case, message)
    assert not any(key[0] == provider.source for key in runtime._LOADED)  # refused before any model work


@pytest.mark.parametrize(("case", "schema"), KEPT, ids=[case for case, _ in KEPT])
def test_schemas_it_keeps_give_answers_that_validate(tiny_model: Path, case: str, schema: dict[str, Any]) -> None:
    from evret_core.contracts.provider import ChatMessage

    provider = TransformersProvider(str(tiny_model), max_new_tokens=400)
    for seed, temperature in ((0, 0.0), (1, 1.0), (2, 1.3)):
        provider.seed = seed
        answer = asyncio.run(provider.acomplete([ChatMessage("user", f"say something {seed}")],
                                                temperature=temperature, json_schema=schema)).text
        value = json.loads(answer)
        for validator in (jsonschema.Draft202012Validator, jsonschema.Draft7Validator):
            errors = [e.message for e in validator(schema).iter_errors(value)]
            assert errors == [], (case, validator.__name__, answer, errors)


def old_allowed(constraint: Any, state: Any) -> set[tuple[int, int]]:
    """The oracle: the allowed tokens as the index grouped by first character found them before the trie, every
    token of each first character the grammar accepts run through the grammar whole."""
    from evret_transformers.tokens import TokenConstraint

    grammar, index = constraint.grammar, constraint.index
    ids: list[int] = []
    costs: list[int] = []
    if TokenConstraint._free_string(state):
        stack = next(iter(state))
        rest = grammar.cost(frozenset([stack[:-1]]))
        _, low, high, _esc = stack[-1]
        for token_id, length in zip(index.plain_ids, index.plain_lengths, strict=True):
            if high is None or length <= high:
                ids.append(token_id)
                costs.append(rest + max(0, low - length) + 1)
        constraint._check(state, index.special_ids, ids, costs)
    else:
        by_first: dict[str, list[int]] = {}
        for token_id, text in enumerate(index.strings):
            if text and "\ufffd" not in text:
                by_first.setdefault(text[0], []).append(token_id)
        for first, candidates in by_first.items():
            if grammar.advance(state, first):
                constraint._check(state, candidates, ids, costs)
    assert len(ids) == len(set(ids))
    return set(zip(ids, costs, strict=True))


SYNTHETIC = ['{"', '":', '","', '"}', '"]', '"],"', "true", "tr", "ue", "fal", "se", "false", "null", "nul", "[", "]",
             "[]", "{}", "}", "},{", ",", ":", '"', "\\", '\\"', "\\n", "\\u00", "e9", "0", "1", "12", "-", ".", "5",
             "e", "E+", " ", "a", "ab", "abc", "the", " the", "é", "日本", "\ufffd", "", "answer", '{"answer":"',
             '"claims":[', "refused", "grade", '"grade":', "supported", "Yes", "No", "A", "B", "tie"]


ALPHABET = [chr(i) for i in range(0x80)] + ["é", "日", "\u2028", "\U0001F600"]


@pytest.mark.parametrize("schema", PROJECT_SCHEMAS, ids=lambda s: s.__name__)
def test_the_trie_allows_what_the_first_character_scan_allowed_in_every_state(tiny_model: Path,
                                                                               schema: type[BaseModel]) -> None:
    """Every state reached from the start (breadth first, up to 300 per schema and vocabulary) with the tiny
    model's vocabulary and a synthetic one of JSON fragments: the same tokens, with the same costs; and the first
    characters the trie tries (``next_chars``) hold every character the grammar takes."""
    from evret_transformers import runtime
    from evret_transformers.tokens import TokenConstraint, TokenIndex

    tokenizer = runtime.load(str(tiny_model.resolve()), "auto", "auto").tokenizer
    reached = []
    for strings in (runtime.token_strings(tokenizer), SYNTHETIC + [None] * 3):
        index = TokenIndex(strings)
        grammar = JsonGrammar(schema.model_json_schema(), literal_cost=index.spell_cost)
        constraint = TokenConstraint(grammar, index)
        seen, queue, visited = {grammar.initial()}, [grammar.initial()], 0
        while queue and visited < 300:
            state = queue.pop(0)
            visited += 1
            ids, costs = constraint.allowed(state)
            assert set(zip(ids, costs, strict=True)) == old_allowed(constraint, state)
            chars = grammar.next_chars(state)  # the trie's first branches: every character the state takes
            assert chars is None or {ch for ch in ALPHABET if grammar.advance(state, ch)} <= chars
            for token_id in ids:
                after = grammar.advance(state, index.strings[token_id] or "")
                if after not in seen:
                    seen.add(after)
                    queue.append(after)
        reached.append(visited)
    assert reached[0] > 10 and reached[1] >= 2  # the synthetic vocabulary cannot spell every schema far
