"""evret_core.io.corpus: the one JSONL corpus reader behind from_beir, bm25, dense and the vector-store helpers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evret_core import EvretError
from evret_core.io.corpus import read_corpus
from evret_core.io.jsonio import iter_json_lines


def test_read_corpus_ids_titles_and_order(tmp_path: Path) -> None:
    path = tmp_path / "corpus.jsonl"
    lines = [{"_id": "b", "title": "Bees", "text": "They dance.", "year": 2020}, {"doc_id": 7, "text": "No title."},
             {"id": "a", "title": None, "text": "Null title."}, {"_id": "c", "id": "ignored", "text": "Both ids."}]
    path.write_bytes(b"\xef\xbb\xbf" + "\r\n".join(json.dumps(x) for x in lines).encode() + b"\r\n\r\n")
    assert read_corpus(path) == {"b": {"title": "Bees", "text": "They dance."}, "7": {"title": "", "text": "No title."},
                                 "a": {"title": "", "text": "Null title."}, "c": {"title": "", "text": "Both ids."}}
    assert list(read_corpus(path)) == ["b", "7", "a", "c"]


def test_a_line_separator_inside_a_string_does_not_split_the_line(tmp_path: Path) -> None:
    path = tmp_path / "corpus.jsonl"
    path.write_text(json.dumps({"_id": "x", "text": "one\u2028two\x85three"}, ensure_ascii=False) + "\n"
                    + json.dumps({"_id": "y", "text": "next"}) + "\n", encoding="utf-8")
    assert read_corpus(path)["x"]["text"] == "one\u2028two\x85three"
    assert [lineno for lineno, _where, _value in iter_json_lines(path)] == [1, 2]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{bad", r"c.jsonl:3: invalid JSON \(Expecting property name"),
        ("[1]", r"c.jsonl:3: expected a JSON object, got list"),
        ('{"text": "x"}', r"c.jsonl:3: the record has no '_id', 'doc_id' or 'id' field"),
        ('{"_id": ["x"], "text": "x"}', r"c.jsonl:3: field '_id' is not a string or a number"),
        ('{"_id": "x", "text": 3}', r"c.jsonl:3: field 'text' is missing or not a string"),
        ('{"_id": "x", "text": "t", "title": 3}', r"c.jsonl:3: field 'title' is not a string"),
        ('{"id": "a", "text": "again"}', r"c.jsonl:3: duplicate document id 'a' \(first on line 1\)"),
    ],
)
def test_bad_lines_name_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text('{"_id": "a", "text": "ok"}\n\n' + line + "\n", encoding="utf-8")
    with pytest.raises(EvretError, match=message):
        read_corpus(path)


def test_file_level_errors(tmp_path: Path) -> None:
    with pytest.raises(EvretError, match=r"missing.jsonl: no such corpus file"):
        read_corpus(tmp_path / "missing.jsonl")
    with pytest.raises(EvretError, match=r": is a folder, not a file"):
        read_corpus(tmp_path)
    (tmp_path / "empty.jsonl").write_text("\n\n", encoding="utf-8")
    with pytest.raises(EvretError, match=r"empty.jsonl: the corpus has no documents"):
        read_corpus(tmp_path / "empty.jsonl")
    (tmp_path / "latin1.jsonl").write_bytes(b'{"_id": "a", "text": "caf\xe9"}\n')
    with pytest.raises(EvretError, match=r"latin1.jsonl:1:26: not UTF-8 text \(byte 0xe9\)"):
        read_corpus(tmp_path / "latin1.jsonl")
