"""The command line's ``KEY=VALUE`` options (``--judge-option min_tokens=2``): each value read as JSON when it parses."""

from __future__ import annotations

import json
import math
from typing import Any

from evret_core.contracts.errors import EvretError

__all__ = ["parse_options", "parse_value"]


def parse_value(text: str) -> Any:
    """A KEY=VALUE value: JSON when it parses (numbers, true/false, null, lists, objects), else the string."""
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


def parse_options(pairs: list[str] | None, option: str) -> dict[str, Any]:
    """Turn ``["a=1", "b=x"]`` into ``{"a": 1, "b": "x"}``; errors name the command-line option."""
    options: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise EvretError(f"{option} {pair!r}: write it as KEY=VALUE")
        parsed = parse_value(value)
        if isinstance(parsed, float) and not math.isfinite(parsed):
            raise EvretError(f"{option} {pair!r}: {parsed} is not a finite number")
        options[key.replace("-", "_")] = parsed
    return options
