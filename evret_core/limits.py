"""Bounds on the numbers a user can type, so that a typo fails with a message instead of a traceback or a
multi-GiB allocation, and the one reading of a yes/no option. One place, shared by the CLI, config files, the
Python API and plugins (through the SDK)."""

from __future__ import annotations

import math
from typing import Any

from evret_core.contracts.errors import EvretError

MAX_DEPTH = 100_000
"""The largest retrieval depth (``-k``) and metric cutoff (``recall@K``): documents per query."""

MAX_RESAMPLES = 1_000_000
"""The most bootstrap / randomization resamples (each is one pass over the per-query scores)."""

MAX_SEED = 2**63 - 1
"""Seeds are 0 .. 2**63 - 1 (numpy refuses negative seeds)."""

MAX_SLICE_SIZE = 1_000_000_000


def check_int(value: Any, option: str, low: int, high: int) -> int:
    """``value`` as an int in ``[low, high]``, else an :class:`EvretError` naming ``option``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise EvretError(f"{option} must be an integer from {low} to {high}, got {value!r}")
    if not low <= value <= high:
        raise EvretError(f"{option} must be an integer from {low} to {high}, got {value}")
    return value


def check_float(value: Any, option: str, low: float, high: float, open_interval: bool = False) -> float:
    """``value`` as a finite float in ``[low, high]`` (``(low, high)`` when ``open_interval``), else an
    :class:`EvretError` naming ``option``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise EvretError(f"{option} must be a number, got {value!r}")
    number = float(value)
    inside = low < number < high if open_interval else low <= number <= high
    if not math.isfinite(number) or not inside:
        bounds = f"between {low:g} and {high:g}" + (" (exclusive)" if open_interval else "")
        raise EvretError(f"{option} must be {bounds}, got {value}")
    return number


TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")


def check_bootstrap(seed: Any, n_resamples: Any, confidence_level: Any) -> None:
    """The bootstrap flags of a command (``--seed``, ``--n-resamples``, ``--confidence-level``) in their bounds."""
    check_int(seed, "--seed", 0, MAX_SEED)
    check_int(n_resamples, "--n-resamples", 1, MAX_RESAMPLES)
    check_float(confidence_level, "--confidence-level", 0.0, 1.0, open_interval=True)


def check_bool(value: Any, option: str) -> bool:
    """``value`` as a bool: a bool, the integer 0 or 1, or the text a command line or config gives (``true``/
    ``false``, ``yes``/``no``, ``on``/``off``, ``1``/``0``, any case); anything else is an :class:`EvretError`
    naming ``option``, never a silent ``False``."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in TRUE_WORDS:
            return True
        if text in FALSE_WORDS:
            return False
    raise EvretError(f"{option} must be true or false, got {value!r}")
