"""Context packing: a ranking cut to the passages that fit a prompt's token budget.

A passage's size is counted by :func:`token_counter`: about four characters per token by default, or the exact
count of a local Hugging Face tokenizer (the model's own, so the budget is the prompt's). :func:`pack` walks the
ranking best first and keeps each passage that still fits in what is left of the budget: a passage too long for
what is left is skipped, and a shorter one ranked below it may still fit (the greedy fill a RAG prompt builder does).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

from evret_core.contracts.errors import EvretError
from evret_core.contracts.retrieve import RetrievalResult

__all__ = ["CHARS_PER_TOKEN", "pack", "token_counter"]

CHARS_PER_TOKEN = 4
"""The default count: one token per four characters, rounded up (the usual rule of thumb for English text)."""


def _chars(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def token_counter(tokenizer: str | None) -> Callable[[str], int]:
    """How many tokens a text takes: ``None`` or ``"chars"`` counts ``ceil(len(text) / 4)`` (0 for ``""``); any
    other value is a local Hugging Face tokenizer folder (loaded with ``local_files_only``, so never from the
    network), counting the tokens of the text encoded without special tokens."""
    if tokenizer is None or tokenizer == "chars":
        return _chars
    if not isinstance(tokenizer, str) or not tokenizer.strip():
        raise EvretError(f"option tokenizer={tokenizer!r}: expected 'chars' or a local tokenizer folder")
    folder = Path(tokenizer).expanduser()
    if not folder.is_dir():
        raise EvretError(f"option tokenizer={tokenizer!r}: no such tokenizer folder (a local Hugging Face "
                         f"tokenizer folder, or 'chars' for about 4 characters per token)")
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise EvretError(f"option tokenizer={tokenizer!r} needs transformers, which is not installed "
                         f"(pip install transformers), or use tokenizer='chars'") from None
    try:
        loaded = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    except Exception as exc:  # transformers raises OSError, ValueError, KeyError... for a folder it cannot read
        raise EvretError(f"option tokenizer={tokenizer!r}: could not load a tokenizer from folder {folder} "
                         f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else 'no message'})") from None

    def count(text: str) -> int:
        return len(loaded.encode(text, add_special_tokens=False))

    return count


def pack(results: Sequence[RetrievalResult], budget: int, count: Callable[[str], int]) -> list[RetrievalResult]:
    """The results of a ranking (best first) that fit ``budget`` tokens, in rank order: each result whose text
    (``count`` tokens of it) fits in what is left is kept; one that does not is skipped. A result without a text is
    an :class:`EvretError` naming it (it has nothing to put in the prompt)."""
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ValueError(f"budget must be an integer >= 1, got {budget!r}")
    left = budget
    kept: list[RetrievalResult] = []
    for result in results:
        text = result.text
        if text is None:
            raise EvretError(f"packing: document {result.doc_id!r} has no text to count against the token budget")
        size = count(text)
        if size <= left:
            kept.append(result)
            left -= size
    return kept
