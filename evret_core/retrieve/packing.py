"""Packing a ranking into a prompt's token budget: :func:`token_counter` counts a text's tokens (about four characters
a token, or a local Hugging Face tokenizer), :func:`pack` keeps the results that fit, best first."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from evret_core.contracts.errors import EvretError
from evret_core.contracts.retrieve import RetrievalResult

__all__ = ["pack", "token_counter"]


def _chars(text: str) -> int:
    return math.ceil(len(text) / 4)


def token_counter(tokenizer: str | None) -> Callable[[str], int]:
    """A text's token count: None or ``"chars"`` gives ceil(len(text) / 4); otherwise ``tokenizer`` is a local
    Hugging Face tokenizer folder (loaded offline) whose ``encode`` length is the count. A tokenizer that cannot be
    loaded is an :class:`EvretError` naming the option."""
    if tokenizer is None or tokenizer == "chars":
        return _chars
    if not isinstance(tokenizer, str) or not tokenizer.strip():
        raise EvretError(f"option tokenizer must be 'chars' or a tokenizer folder, got {tokenizer!r}")
    try:
        from transformers import AutoTokenizer

        loaded: Any = AutoTokenizer.from_pretrained(tokenizer, local_files_only=True)
    except Exception as exc:  # any failure to load (a missing folder, no transformers) is the option's error
        raise EvretError(f"option tokenizer={tokenizer!r}: cannot load a tokenizer from it "
                         f"({type(exc).__name__}: {exc})") from None

    def count(text: str) -> int:
        return len(loaded.encode(text, add_special_tokens=False))

    return count


def pack(results: Sequence[RetrievalResult], budget: int, count: Callable[[str], int]) -> list[RetrievalResult]:
    """The results kept, in order, walking the ranking and keeping each whose text fits in what is left of
    ``budget`` tokens (a passage too long is skipped; later shorter ones may still fit). ``budget`` must be an
    integer >= 1 (ValueError otherwise)."""
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ValueError(f"budget must be an integer >= 1, got {budget!r}")
    left = budget
    kept = []
    for result in results:
        size = count(result.text or "")
        if size <= left:
            kept.append(result)
            left -= size
    return kept
