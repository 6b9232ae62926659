"""Writing a results file: the indented JSON of each record is written by `indented`, which gives json.dumps's
text byte for byte (json's own indenting encoder is pure Python and was most of a 200,000-query run's time)."""

from __future__ import annotations

import json
import math
import random
from enum import IntEnum
from typing import Any

import pytest

from evret_core.results.evaluation import indented

SPECIAL = [0.0, -0.0, 1e16, 1e-7, 5e-324, 1.7976931348623157e308, 0.1 + 0.2, 2**63, -(2**70), True, False, None,
           "", "é", "\u2028", "\ud800", "tab\tand \"quote\" \\ </script>", "日本", "\x00\x1f\x7f"]


def _judgment(rng: random.Random) -> dict[str, Any]:
    """The shape the evaluator writes most, with now and then a value it does not."""
    return {"rank": rng.choice([1, 2, True, 3.0]), "doc_id": rng.choice(["d1", "é\"", 7]),
            "score": rng.choice([None, 1.5, -0.0, 2]), "text": rng.choice([None, "", "a </b>"]),
            "matched": rng.choice([[], [], [0, 1], ()]), "unmeasured": rng.choice([[], [], [2]]),
            "assigned": rng.choice([None, "answer:0", "d1", 1])}


def _random(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if roll < 0.1:
        return [_judgment(rng) for _ in range(rng.randrange(3))]
    if depth > 3 or roll < 0.4:
        return rng.choice([*SPECIAL, rng.random(), rng.randrange(-10**6, 10**6), "".join(
            chr(rng.choice([rng.randrange(32, 127), rng.randrange(0x80, 0x3000)])) for _ in range(rng.randrange(6)))])
    if roll < 0.7:
        return [_random(rng, depth + 1) for _ in range(rng.randrange(4))] if rng.random() < 0.8 else \
            tuple(_random(rng, depth + 1) for _ in range(rng.randrange(3)))
    return {rng.choice(["k", "é", "", "a b", str(rng.random())]): _random(rng, depth + 1) for _ in range(rng.randrange(4))}


@pytest.mark.parametrize("indent", [0, 2, 4])
def test_indented_writes_what_json_dumps_writes(indent: int) -> None:
    rng = random.Random(indent)
    for _ in range(3000):
        value = _random(rng)
        for depth in (0, 2):
            expected = json.dumps(value, indent=indent, allow_nan=False).replace("\n", "\n" + " " * indent * depth)
            assert indented(value, "\n" + " " * indent * depth, " " * indent) == expected


class Grade(IntEnum):
    ONE = 1


@pytest.mark.parametrize(("value", "error"), [
    (math.nan, ValueError), ([1, {"a": math.inf}], ValueError), (-math.inf, ValueError),
    ([{"rank": 1, "doc_id": "d", "score": math.nan, "text": None, "matched": [], "unmeasured": [], "assigned": None}],
     ValueError),
    ({1: "int key"}, TypeError), (Grade.ONE, TypeError), ({"a": {1, 2}}, TypeError), (b"bytes", TypeError),
])
def test_anything_but_plain_finite_data_is_left_to_json(value: Any, error: type[Exception]) -> None:
    """A NaN, an infinity or a value that is not plain JSON data raises, so the writer asks json itself (which
    writes a NaN retriever score as null, an int key as a string...)."""
    with pytest.raises(error):
        indented(value, "\n", "  ")
