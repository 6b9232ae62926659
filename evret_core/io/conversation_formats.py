"""Loading a conversation dataset by its format: the conversation JSON Lines file
(:meth:`~evret_core.io.conversations.ConversationSet.from_jsonl`) or MTRAG data
(:func:`~evret_core.io.mtrag.read_mtrag`), the one entry point a command calls for ``--dataset-format``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evret_core.contracts.errors import EvretError, did_you_mean
from evret_core.io.conversations import ConversationSet, is_conversation_file
from evret_core.io.mtrag import read_mtrag

__all__ = ["DATASET_FORMATS", "load_conversations"]

DATASET_FORMATS: tuple[str, ...] = ("conversations", "mtrag")
"""The values of ``dataset_format`` for :func:`load_conversations`."""


def load_conversations(path: str | Path, corpus: str | Path | Mapping[str, Mapping[str, Any]] | None = None,
                       qrels: str | Path | None = None, dataset_format: str | None = None) -> ConversationSet:
    """A conversation dataset by its format: ``"conversations"`` (the JSONL, with ``corpus`` and ``qrels`` when
    given), ``"mtrag"`` (an MTRAG folder or file, which brings its own qrels), or None: a conversation JSONL file
    recognised by its first record (:func:`~evret_core.io.conversations.is_conversation_file`)."""
    path = Path(path)
    if dataset_format is not None and dataset_format not in DATASET_FORMATS:
        raise EvretError(f"unknown dataset format {dataset_format!r}{did_you_mean(dataset_format, DATASET_FORMATS)}; "
                         f"use {' or '.join(DATASET_FORMATS)}")
    if dataset_format == "mtrag":
        if qrels is not None:
            raise EvretError(f"{qrels}: MTRAG data brings its own qrels (qrels/dev.tsv); leave out the qrels file")
        return read_mtrag(path, corpus)
    if dataset_format is None and not is_conversation_file(path):
        raise EvretError(f"{path}: not a conversation file (a .jsonl file whose records have 'turns'); MTRAG data "
                         "needs the dataset format 'mtrag'")
    return ConversationSet.from_jsonl(path, corpus, qrels)
