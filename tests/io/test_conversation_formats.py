"""Loading a conversation dataset by its format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evret_core.contracts.errors import EvretError
from evret_core.io.conversation_formats import load_conversations
from evret_core.io.conversations import ConversationSet, is_conversation_file
from evret_core.io.mtrag import read_mtrag
from evret_core.testing.shared_data import shared_data

LAW = {"conversation_id": "law-17", "turns": [{"user": "Can I use the library?", "relevant_doc_ids": ["lib-12"]}]}


def write(tmp_path: Path, record: object, name: str = "conversations.jsonl") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    return path


def test_load_recognises_a_conversation_file(tmp_path: Path) -> None:
    path = write(tmp_path, LAW)
    assert is_conversation_file(path)
    assert load_conversations(path).conversations == ConversationSet.from_jsonl(path).conversations
    single = write(tmp_path, {"query": "q", "relevant_doc_ids": ["d"]}, name="single.jsonl")
    assert not is_conversation_file(single) and not is_conversation_file(tmp_path / "none.jsonl")
    with pytest.raises(EvretError, match=r"single.jsonl: not a conversation file"):
        load_conversations(single)
    with pytest.raises(EvretError, match=r"unknown dataset format 'mtarg' \(did you mean mtrag\?\)"):
        load_conversations(path, dataset_format="mtarg")
    with pytest.raises(EvretError, match=r"single.jsonl:1: unknown field 'query'"):
        load_conversations(single, dataset_format="conversations")



def test_mtrag_data_by_its_format(tmp_path: Path) -> None:
    govt = shared_data("datasets", "mtrag", "retrieval_tasks", "govt", what="MTRAG")
    assert load_conversations(govt, dataset_format="mtrag").conversations == read_mtrag(govt).conversations
    with pytest.raises(EvretError, match=r"q.tsv: MTRAG data brings its own qrels"):
        load_conversations(govt, qrels=tmp_path / "q.tsv", dataset_format="mtrag")
    with pytest.raises(EvretError, match=r"govt: not a conversation file"):
        load_conversations(govt)
