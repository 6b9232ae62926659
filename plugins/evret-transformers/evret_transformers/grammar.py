"""A JSON Schema as a character automaton: what may come next, and how many characters are left at least.

:class:`JsonGrammar` compiles a schema (the subset the project's pydantic schemas use: objects, strings with
length bounds, enums and ``const``, integers, numbers, booleans, null, arrays with ``items`` or ``prefixItems`` and
item bounds, ``anyOf``/``oneOf``, ``$ref`` to ``$defs``) into a nondeterministic pushdown automaton over
characters. The language is compact JSON (no whitespace) with every property of an object, in the schema's order,
so any text it accepts parses and validates against the schema. A state is a frozenset of stacks; each stack is a
tuple of items, its top last. Pure Python: no torch, no numpy.

What it cannot keep it refuses (:class:`SchemaNotSupported`, naming the keyword), never ignores: assertions it
does not express (``pattern``, ``format``, ``dependencies``...), a property count that writing every property
breaks (``maxProperties``, ``minProperties``), ``required`` naming a property it does not write, a ``const`` or
``enum`` no value of which fits the keywords beside it (values that do not fit are dropped), assertions beside
``$ref``/``anyOf``/``oneOf``/``allOf``, ``oneOf`` branches that may overlap, empty ``enum``/``anyOf``, bounds that
no value meets (unsatisfiable, said so), and schemas nested deeper than :data:`MAX_NESTING` levels.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

Item = tuple[Any, ...]
Stack = tuple[Item, ...]
State = frozenset[Stack]

MAX_INT_DIGITS = 15  # integers and the two parts of a number stay within what a float holds exactly
SMALL_RANGE = 256  # an integer range this small becomes an enum of its values
MAX_NESTING = 128  # levels of JSON objects and arrays in a schema (a property is two: the map and its schema)
_ESCAPES = frozenset('"\\/bfnrt')
_HEX = frozenset("0123456789abcdefABCDEF")
_DIGITS = frozenset("0123456789")
# keywords that restrict values in ways this grammar does not express: refused rather than silently ignored
_UNSUPPORTED = ("pattern", "not", "if", "patternProperties", "multipleOf", "uniqueItems", "contains",
                "format", "propertyNames", "dependentRequired", "dependentSchemas", "dependencies")
# keywords that never restrict a value (annotations, and the definitions a $ref points into)
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$comment", "deprecated", "readOnly",
                          "writeOnly", "$schema", "$id", "$anchor", "$defs", "definitions", "contentEncoding",
                          "contentMediaType", "contentSchema", "discriminator"})
# keywords checked on each value of a const or enum (values that break one are dropped)
_VALUE_KEYWORDS = ("type", "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                   "minItems", "maxItems", "minProperties", "maxProperties")
_COUNTS = ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties")


class SchemaNotSupported(ValueError):
    """The schema uses a keyword or shape that constrained decoding cannot guarantee."""


def _lit(value: Any) -> tuple[str, str]:
    return ("lit", json.dumps(value, ensure_ascii=True, separators=(",", ":")))


class JsonGrammar:
    """The automaton of one JSON Schema. :meth:`initial`, :meth:`advance` (a state after some text; empty when
    the text cannot continue valid JSON) and :meth:`cost` (the fewest characters that complete the JSON from a
    state; 0 when it is complete: characters, or tokens when ``literal_cost`` counts the tokens of fixed text)."""

    def __init__(self, schema: Mapping[str, Any], literal_cost: Callable[[str], int] | None = None) -> None:
        check_nesting(schema)
        # what a fixed text (a key, a brace, an enum value) costs to finish: its characters, or, given a
        # vocabulary, the fewest tokens that spell it; free text counts one token per character
        self._literal_cost = lru_cache(maxsize=8192)(literal_cost or len)
        self._root_schema = schema
        self._defs: dict[str, Any] = dict(schema.get("$defs") or schema.get("definitions") or {})
        self._nodes: list[tuple[Any, ...]] = []
        self._ids: dict[tuple[Any, ...], int] = {}
        self._resolving: set[str] = set()
        self.root = self._compile(schema)
        self._min = [0] * len(self._nodes)
        for node_id in range(len(self._nodes)):  # children are compiled first, so one pass in order suffices
            self._min[node_id] = self._node_cost(self._nodes[node_id])
        self._step = lru_cache(maxsize=65536)(self._step_uncached)

    # -- compiling ----------------------------------------------------------------------------------------
    def _add(self, node: tuple[Any, ...]) -> int:
        if node not in self._ids:
            self._ids[node] = len(self._nodes)
            self._nodes.append(node)
        return self._ids[node]

    def _compile(self, schema: Any) -> int:
        if schema is True or schema == {}:
            schema = {"type": ["string", "number", "boolean", "null"]}
        if not isinstance(schema, Mapping):
            raise SchemaNotSupported(f"a schema must be an object, got {schema!r}")
        used = [k for k in _UNSUPPORTED if k in schema]
        if used:
            raise SchemaNotSupported(f"the keyword {used[0]!r} is not supported by constrained decoding")
        for key in _COUNTS:
            value = schema.get(key)
            if key in schema and (isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0
                                  or value != int(value)):
                raise SchemaNotSupported(f"{key!r} must be a non-negative integer, got {value!r}")
        if "$ref" in schema:
            _alone(schema, "$ref")
            return self._ref(str(schema["$ref"]))
        if "const" in schema or "enum" in schema:
            return self._literals(schema)
        for key in ("anyOf", "oneOf"):
            if key in schema:
                _alone(schema, key)
                branches = schema[key]
                if not isinstance(branches, list) or not branches:
                    raise SchemaNotSupported(f"{key!r} is empty: no value can match it")
                if key == "oneOf":
                    self._check_disjoint(branches)
                return self._add(("alt", tuple(self._compile(s) for s in branches)))
        if "allOf" in schema:
            _alone(schema, "allOf")
            parts = schema["allOf"]
            if not isinstance(parts, list) or len(parts) != 1:
                raise SchemaNotSupported("'allOf' with other than one schema is not supported")
            return self._compile(parts[0])
        kind = schema.get("type")
        if kind is None:
            kind = "object" if "properties" in schema else "array" if "items" in schema else None
        if kind is None:
            return self._compile(True)
        if isinstance(kind, list):
            return self._add(("alt", tuple(self._compile({**schema, "type": k}) for k in kind)))
        return self._typed(str(kind), schema)

    def _literals(self, schema: Mapping[str, Any]) -> int:
        """A ``const`` or an ``enum``: its values that fit the keywords beside it (``type``, lengths, bounds)."""
        key = "const" if "const" in schema else "enum"
        values = [schema["const"]] if key == "const" else schema["enum"]
        if not isinstance(values, list) or not values:
            raise SchemaNotSupported(f"{key!r} is empty: no value can match it")
        if key == "const" and "enum" in schema and not any(_same(schema["const"], v) for v in schema["enum"]
                                                           if isinstance(schema["enum"], list)):
            raise SchemaNotSupported(f"'const' {schema['const']!r} is not one of 'enum'")
        other = [k for k in schema if k not in _ANNOTATIONS and k not in ("const", "enum", *_VALUE_KEYWORDS)]
        if other:
            raise SchemaNotSupported(f"the keyword {other[0]!r} beside {key!r} is not supported")
        kept, broken = [], None
        for value in values:
            reason = _misfit(value, schema)
            if reason is None:
                kept.append(value)
            else:
                broken = broken or reason
        if not kept:
            if key == "const":
                raise SchemaNotSupported(f"'const' {values[0]!r} contradicts {broken}")
            raise SchemaNotSupported(f"no value of 'enum' fits {broken}")
        return self._add(("alt", tuple(self._add(_lit(v)) for v in kept)))

    def _check_disjoint(self, branches: list[Any]) -> None:
        """``oneOf`` asks that an answer match exactly one branch: the grammar keeps it only for branches of
        different types or values (one answer can then match one branch only)."""
        kinds = [self._kinds(branch) for branch in branches]
        for i, a in enumerate(kinds):
            for b in kinds[i + 1:]:
                if a is None or b is None or _overlap(a, b):
                    raise SchemaNotSupported("'oneOf' with branches that may overlap (an answer must match "
                                             "exactly one) is not supported; use 'anyOf', or branches of "
                                             "different types or values")

    def _kinds(self, schema: Any) -> set[str] | list[Any] | None:
        """A branch's literal values, or its JSON types, or None when that cannot be told simply."""
        if not isinstance(schema, Mapping) or not schema:
            return None
        if "$ref" in schema:
            target = self._target(str(schema["$ref"]))
            return None if target is None or str(schema["$ref"]) in self._resolving else self._kinds(target)
        if "const" in schema:
            return [schema["const"]]
        if "enum" in schema and isinstance(schema["enum"], list):
            return list(schema["enum"])
        kind = schema.get("type")
        if kind is None:
            kind = "object" if "properties" in schema else "array" if "items" in schema else None
        if kind is None or any(k in schema for k in ("anyOf", "oneOf", "allOf")):
            return None
        return {str(k) for k in kind} if isinstance(kind, list) else {str(kind)}

    def _target(self, ref: str) -> Any:
        prefix = next((p for p in ("#/$defs/", "#/definitions/") if ref.startswith(p)), None)
        if ref == "#":
            return self._root_schema
        if prefix is not None and ref[len(prefix):] in self._defs:
            return self._defs[ref[len(prefix):]]
        return None

    def _ref(self, ref: str) -> int:
        target = self._target(ref)
        if target is None:
            raise SchemaNotSupported(f"the reference {ref!r} does not name a definition of the schema")
        if ref in self._resolving:
            raise SchemaNotSupported(f"the recursive reference {ref!r} is not supported")
        self._resolving.add(ref)
        try:
            return self._compile(target)
        finally:
            self._resolving.discard(ref)

    def _typed(self, kind: str, schema: Mapping[str, Any]) -> int:
        if kind == "object":
            props = dict(schema.get("properties") or {})
            required = schema.get("required") or []
            if not isinstance(required, list):
                raise SchemaNotSupported(f"'required' must be a list of property names, got {required!r}")
            missing = [name for name in required if name not in props]
            if missing:  # only the schema's own properties are written
                raise SchemaNotSupported(f"'required' names {missing[0]!r}, which is not in 'properties' "
                                         f"(constrained decoding writes the listed properties only)")
            if int(schema.get("maxProperties", len(props))) < len(props):
                raise SchemaNotSupported(f"'maxProperties' {schema['maxProperties']} is fewer than the {len(props)} "
                                         f"properties constrained decoding writes (it writes every property)")
            if int(schema.get("minProperties", 0)) > len(props):
                raise SchemaNotSupported(f"'minProperties' {schema['minProperties']} is more than the "
                                         f"{len(props)} properties constrained decoding writes (the listed ones)")
            if not props:
                return self._add(("lit", "{}"))
            parts: list[int] = []
            for i, (name, sub) in enumerate(props.items()):
                parts.append(self._add(("lit", ("{" if i == 0 else ",") + _lit(str(name))[1] + ":")))
                parts.append(self._compile(sub))
            parts.append(self._add(("lit", "}")))
            return self._add(("seq", tuple(parts)))
        if kind == "string":
            low = int(schema.get("minLength", 0))
            high = schema.get("maxLength")
            if high is not None and low > int(high):
                raise SchemaNotSupported(f"unsatisfiable: 'minLength' {low} > 'maxLength' {int(high)}: no string "
                                         f"has both")
            return self._add(("str", low, None if high is None else int(high)))
        if kind == "integer":
            return self._integer(schema)
        if kind == "number":
            negative = not _at_least_zero(schema)
            return self._add(("num", negative))
        if kind == "boolean":
            return self._add(("alt", (self._add(("lit", "true")), self._add(("lit", "false")))))
        if kind == "null":
            return self._add(("lit", "null"))
        if kind == "array":
            return self._array(schema)
        raise SchemaNotSupported(f"the type {kind!r} is not supported")

    def _integer(self, schema: Mapping[str, Any]) -> int:
        low = _bound(schema, "minimum", "exclusiveMinimum", +1)
        high = _bound(schema, "maximum", "exclusiveMaximum", -1)
        if low is not None and high is not None:
            if high < low:
                raise SchemaNotSupported(f"no integer lies between {low} and {high}")
            if high - low < SMALL_RANGE:
                return self._add(("alt", tuple(self._add(("lit", str(v))) for v in range(low, high + 1))))
        if high is not None or low not in (None, 0):
            raise SchemaNotSupported("integer bounds other than 'minimum' 0 or a range under 256 values "
                                     "are not supported")
        return self._add(("int", low is None))

    def _array(self, schema: Mapping[str, Any]) -> int:
        prefix = schema.get("prefixItems")
        low = int(schema.get("minItems", 0))
        high = schema.get("maxItems")
        if high is not None and low > int(high):
            raise SchemaNotSupported(f"unsatisfiable: 'minItems' {low} > 'maxItems' {int(high)}: no array has both")
        if isinstance(schema.get("items"), list):
            raise SchemaNotSupported("'items' as a list (draft 7 tuples) is not supported; write 'prefixItems'")
        if prefix:
            if not low <= len(prefix) <= (len(prefix) if high is None else int(high)):
                raise SchemaNotSupported("'prefixItems' with other item counts is not supported")
            parts: list[int] = []
            for i, sub in enumerate(prefix):
                parts += [self._add(("lit", "[" if i == 0 else ",")), self._compile(sub)]
            parts.append(self._add(("lit", "]")))
            return self._add(("seq", tuple(parts)))
        item = self._compile(schema.get("items", True))
        return self._add(("arr", item, low, None if high is None else int(high)))

    def _node_cost(self, node: tuple[Any, ...]) -> int:
        kind = node[0]
        if kind == "lit":
            return int(self._literal_cost(node[1]))
        if kind == "str":
            return int(node[1]) + 2
        if kind in ("int", "num"):
            return 1
        if kind == "alt":
            return int(min(self._min[c] for c in node[1]))
        if kind == "seq":
            return sum(self._min[c] for c in node[1])
        _, item, low, _high = node  # arr
        return 2 if low == 0 else 1 + int(low) * self._min[item] + (int(low) - 1) + 1

    # -- running ------------------------------------------------------------------------------------------
    def initial(self) -> State:
        return frozenset(self._normalize((("N", self.root),)))

    def advance(self, state: State, text: str) -> State:
        """The state after ``text``; an empty state when ``text`` leaves valid JSON of the schema."""
        for ch in text:
            if not state:
                break
            state = frozenset(s for stack in state for s in self._step(stack, ch))
        return state

    def next_chars(self, state: State) -> frozenset[str] | None:
        """The characters ``state`` may accept next (a superset: :meth:`advance` decides), or None when one of
        its stacks is inside a string, where nearly any character is."""
        chars: set[str] = set()
        for stack in state:
            found = self._stack_chars(stack)
            if found is None:
                return None
            chars |= found
        return frozenset(chars)

    def _stack_chars(self, stack: Stack) -> set[str] | None:
        if not stack:
            return set()
        top = stack[-1]
        kind = top[0]
        if kind == "L":
            return {top[1][0]}
        if kind == "S":
            esc = top[3]
            return None if esc == 0 else set(_HEX) if esc > 0 else set(_ESCAPES) | {"u"}
        if kind == "A":
            return {",", "]"}
        chars = set(_DIGITS) | {"-", "."}  # I or F: what _number_step may take
        if _can_end(top):  # or the number ends and what follows it comes
            for rest in self._normalize(stack[:-1]):
                after = self._stack_chars(rest)
                if after is None:
                    return None
                chars |= after
        return chars

    def cost(self, state: State) -> int:
        """The fewest characters that complete the JSON (0: complete); a large number for a dead state."""
        return min((self._stack_cost(s) for s in state), default=1 << 30)

    def _stack_cost(self, stack: Stack) -> int:
        return sum(self._item_cost(item) for item in stack)

    def _item_cost(self, item: Item) -> int:
        kind = item[0]
        if kind == "L":
            return int(self._literal_cost(item[1]))
        if kind == "N":
            return int(self._min[item[1]])
        if kind == "S":
            _, low, _high, esc = item
            pending = 1 if esc == -1 else int(esc)
            return pending + max(0, int(low) - (1 if esc else 0)) + 1
        if kind in ("I", "F"):
            return 0 if _can_end(item) else 1
        if kind == "A":
            _, node, count, low, _high = item
            return 1 if count >= low else (low - count) * (1 + self._min[node]) + 1
        _, node, low, _high = item  # B: just after '['
        return 1 if low == 0 else low * self._min[node] + (low - 1) + 1

    def _normalize(self, stack: Stack) -> list[Stack]:
        """The stacks whose top consumes characters (or which are empty), expanding nodes on the top."""
        out: list[Stack] = []
        todo = [stack]
        while todo:
            s = todo.pop()
            if not s or s[-1][0] not in ("N", "B"):
                out.append(s)
                continue
            top, rest = s[-1], s[:-1]
            if top[0] == "B":
                _, node, low, high = top
                if low == 0:
                    todo.append(rest + (("L", "]"),))
                if high is None or high >= 1:
                    todo.append(rest + (("A", node, 1, low, high), ("N", node)))
                continue
            node = self._nodes[top[1]]
            kind = node[0]
            if kind == "lit":
                todo.append(rest + (("L", node[1]),))
            elif kind == "str":
                todo.append(rest + (("S", node[1], node[2], 0), ("L", '"')))
            elif kind == "int":
                todo.append(rest + (("I", "start" if node[1] else "sign", 0),))
            elif kind == "num":
                todo.append(rest + (("F", "start" if node[1] else "sign", 0),))
            elif kind == "alt":
                todo.extend(rest + (("N", c),) for c in node[1])
            elif kind == "seq":
                todo.append(rest + tuple(("N", c) for c in reversed(node[1])))
            else:  # arr
                todo.append(rest + (("B", node[1], node[2], node[3]), ("L", "[")))
        return out

    def _step_uncached(self, stack: Stack, ch: str) -> tuple[Stack, ...]:
        if not stack:
            return ()
        top, rest = stack[-1], stack[:-1]
        kind = top[0]
        nexts: list[Stack] = []
        if kind == "L":
            if top[1][0] == ch:
                nexts.append(rest + (("L", top[1][1:]),) if len(top[1]) > 1 else rest)
        elif kind == "S":
            nexts += _string_step(top, rest, ch)
        elif kind == "A":
            _, node, count, low, high = top
            if ch == "," and (high is None or count < high):
                nexts.append(rest + (("A", node, count + 1, low, high), ("N", node)))
            elif ch == "]" and count >= low:
                nexts.append(rest)
        else:  # I or F
            moved = _number_step(top, ch)
            if moved is not None:
                nexts.append(rest + (moved,))
        after = [s for n in nexts for s in self._normalize(n)]
        if kind in ("I", "F") and _can_end(top):  # or the number ends here and the character is what follows
            after += [s for r in self._normalize(rest) for s in self._step(r, ch)]
        return tuple(dict.fromkeys(after))


def check_nesting(schema: Any, limit: int = MAX_NESTING) -> None:
    """A :class:`SchemaNotSupported` for a schema nested deeper than ``limit`` levels of objects and arrays,
    found without recursion (a deep schema must not raise ``RecursionError`` anywhere, its hashing included)."""
    todo: list[tuple[Any, int]] = [(schema, 1)]
    while todo:
        node, depth = todo.pop()
        if depth > limit:
            raise SchemaNotSupported(f"the schema is nested deeper than {limit} levels of objects and arrays")
        children = node.values() if isinstance(node, Mapping) else node if isinstance(node, list) else ()
        todo.extend((child, depth + 1) for child in children if isinstance(child, (Mapping, list)))


def _alone(schema: Mapping[str, Any], key: str) -> None:
    """``key`` (``$ref``, ``anyOf``...) compiles its own schemas only: an assertion beside it would be ignored."""
    other = [k for k in schema if k != key and k not in _ANNOTATIONS]
    if other:
        raise SchemaNotSupported(f"the keyword {other[0]!r} beside {key!r} is not supported")


def _json_types(value: Any) -> set[str]:
    if value is None:
        return {"null"}
    if isinstance(value, bool):
        return {"boolean"}
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return {"integer", "number"}
    if isinstance(value, float):
        return {"number"}
    if isinstance(value, str):
        return {"string"}
    return {"array"} if isinstance(value, list) else {"object"} if isinstance(value, Mapping) else set()


def _same(a: Any, b: Any) -> bool:
    """JSON equality: ``1 == 1.0``, but ``true`` is not ``1``."""
    return (isinstance(a, bool) == isinstance(b, bool)) and a == b


def _misfit(value: Any, schema: Mapping[str, Any]) -> str | None:
    """The keyword beside a ``const``/``enum`` that ``value`` breaks (``'type' integer``), or None."""
    kind = schema.get("type")
    if kind is not None:
        kinds = {str(k) for k in kind} if isinstance(kind, list) else {str(kind)}
        if not kinds & _json_types(value):
            return f"'type' {'/'.join(sorted(kinds))}"
    checks: list[tuple[str, Callable[[Any], bool]]] = []
    if isinstance(value, str):
        checks = [("minLength", lambda n: len(value) >= n), ("maxLength", lambda n: len(value) <= n)]
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        checks = [("minimum", lambda n: value >= n), ("maximum", lambda n: value <= n),
                  ("exclusiveMinimum", lambda n: isinstance(n, bool) or value > n),
                  ("exclusiveMaximum", lambda n: isinstance(n, bool) or value < n)]
    elif isinstance(value, list):
        checks = [("minItems", lambda n: len(value) >= n), ("maxItems", lambda n: len(value) <= n)]
    elif isinstance(value, Mapping):
        checks = [("minProperties", lambda n: len(value) >= n), ("maxProperties", lambda n: len(value) <= n)]
    for key, ok in checks:
        if key in schema and not ok(schema[key]):
            return f"{key!r} {schema[key]!r}"
    return None


def _overlap(a: set[str] | list[Any], b: set[str] | list[Any]) -> bool:
    """Whether a value can match two ``oneOf`` branches, told by their literal values or their JSON types."""
    if isinstance(a, list) and isinstance(b, list):
        return any(_same(x, y) for x in a for y in b)
    if isinstance(a, list) or isinstance(b, list):
        values, kinds = (a, b) if isinstance(a, list) else (b, a)
        assert isinstance(kinds, set) and isinstance(values, list)
        return any(_json_types(v) & _widen(kinds) for v in values)
    return bool(_widen(a) & _widen(b))


def _widen(kinds: set[str]) -> set[str]:
    """Integers are numbers too."""
    return kinds | {"integer"} if "number" in kinds else kinds


def _string_step(top: Item, rest: Stack, ch: str) -> list[Stack]:
    _, low, high, esc = top
    if esc == -1:
        if ch == "u":
            return [rest + (("S", low, high, 4),)]
        return [rest + (("S", max(0, low - 1), high, 0),)] if ch in _ESCAPES else []
    if esc > 0:
        if ch not in _HEX:
            return []
        return [rest + (("S", low, high, esc - 1),)] if esc > 1 else [rest + (("S", max(0, low - 1), high, 0),)]
    if ch == '"':
        return [rest] if low == 0 else []
    if ord(ch) < 0x20:
        return []
    if high is not None and high <= 0:
        return []
    new_high = None if high is None else high - 1
    if ch == "\\":
        return [rest + (("S", low, new_high, -1),)]
    return [rest + (("S", max(0, low - 1), new_high, 0),)]


def _number_step(top: Item, ch: str) -> Item | None:
    """The integer (``I``) or number (``F``) item after ``ch``, or None. Phases: ``start`` (a sign may come),
    ``sign`` (a first digit must), ``zero`` (a leading 0), ``int`` (digits), ``dot`` (a fraction digit must),
    ``frac`` (fraction digits)."""
    kind, phase, n = top
    if phase == "start" and ch == "-":
        return (kind, "sign", 0)
    if phase in ("start", "sign") and ch in _DIGITS:
        return (kind, "zero" if ch == "0" else "int", 1)
    if phase == "int" and ch in _DIGITS and n < MAX_INT_DIGITS:
        return (kind, "int", n + 1)
    if kind == "F" and phase in ("zero", "int") and ch == ".":
        return (kind, "dot", 0)
    if kind == "F" and phase in ("dot", "frac") and ch in _DIGITS and n < MAX_INT_DIGITS:
        return (kind, "frac", n + 1)
    return None


def _can_end(item: Item) -> bool:
    return item[1] in ("zero", "int", "frac")


def _bound(schema: Mapping[str, Any], inclusive: str, exclusive: str, direction: int) -> int | None:
    """An integer bound from ``minimum``/``exclusiveMinimum`` (direction +1) or the maximums (-1)."""
    import math

    values: list[int] = []
    if inclusive in schema:
        value = float(schema[inclusive])
        values.append(math.ceil(value) if direction > 0 else math.floor(value))
    if exclusive in schema and not isinstance(schema[exclusive], bool):
        value = float(schema[exclusive])
        values.append(math.floor(value) + 1 if direction > 0 else math.ceil(value) - 1)
    if not values:
        return None
    return max(values) if direction > 0 else min(values)


def _at_least_zero(schema: Mapping[str, Any]) -> bool:
    """True for ``minimum: 0``; bounds the grammar cannot keep are refused."""
    if any(k in schema for k in ("maximum", "exclusiveMaximum", "exclusiveMinimum")) or \
            schema.get("minimum", 0) != 0:
        raise SchemaNotSupported("number bounds other than 'minimum' 0 are not supported")
    return "minimum" in schema
