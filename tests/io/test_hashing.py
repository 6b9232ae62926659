"""The dataset hash's fast writer gives json.dumps' exact bytes, for usual and unusual field values."""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

import pytest

from evret_core import EvaluationDataset, QueryExample
from evret_core.io.hashing import canonical_query_json, content_hash

ODD = ["", "plain", "ünïcödé", "日本語", "tab\there", "new\nline", 'quote " and \\ backslash', "\x00\x1f\x7f",
       "emoji 🎉", "\u2028\u2029", "</script>", "ﬁ ligature", " spaces  "]


def reference(q: QueryExample) -> str:
    """The hash's definition, written with the json module."""
    data: dict[str, Any] = {"query_id": q.query_id, "query_text": q.query_text,
                            "expected_answers": q.expected_answers, "relevant_doc_ids": q.relevant_doc_ids,
                            "tags": q.tags}
    if any(len(a) != 1 for a in q.answer_aliases):
        data["answer_aliases"] = q.answer_aliases
    return json.dumps(data, sort_keys=True, ensure_ascii=False)


def random_query(rng: random.Random, i: int) -> QueryExample:
    text = lambda: rng.choice(ODD) + str(rng.randint(0, 99))  # noqa: E731
    kind = rng.randrange(4)
    record: dict[str, Any] = {"query_id": f"{text()}-{i}", "query_text": text(),
                              "tags": {text(): text() for _ in range(rng.randrange(3))}}
    if kind == 0:
        record["relevant_doc_ids"] = {text(): rng.choice([1, 2.0, 0.5, 1e-300, 3e300, -0.0, 7])
                                      for _ in range(rng.randrange(1, 6))}
    elif kind == 1:
        record["relevant_doc_ids"] = [text() for _ in range(rng.randrange(1, 4))]
    else:
        record["expected_answers"] = [text() if rng.random() < 0.5 else [text(), text()]
                                      for _ in range(rng.randrange(1, 4))]
        if kind == 3:
            record["relevant_doc_ids"] = {text(): 1.0}
    return QueryExample(**record)


def test_fast_writer_matches_json_dumps_on_random_and_odd_queries() -> None:
    rng = random.Random(7)
    queries = [random_query(rng, i) for i in range(2000)]
    for q in queries:
        assert canonical_query_json(q) == reference(q)
    expected = hashlib.sha256("".join(reference(q) + "\n" for q in queries).encode("utf-8")).hexdigest()
    assert EvaluationDataset(queries=queries).content_hash() == expected


@pytest.mark.parametrize("grade", [2, True, float("nan"), float("inf"), None])
def test_values_changed_after_validation_go_through_json(grade: Any) -> None:
    q = QueryExample(query_id="q", query_text="t", relevant_doc_ids={"b": 1.0, "a": 2.0})
    q.relevant_doc_ids["c"] = grade  # type: ignore[index]  # a user edits the dict in place
    assert canonical_query_json(q) == reference(q)


def test_non_str_key_and_tuple_list_fall_back() -> None:
    q = QueryExample(query_id="q", query_text="t", relevant_doc_ids={"a": 1.0}, tags={"k": "v"})
    q.tags = {3: "x", 1: "y"}  # type: ignore[dict-item]  # assignment is not validated
    q.expected_answers = ("a", "b")  # type: ignore[assignment]
    q.answer_aliases = [["a"], ["b"]]
    assert canonical_query_json(q) == reference(q)


def test_hash_is_chunk_independent_for_many_queries() -> None:
    queries = [QueryExample(query_id=f"q{i}", query_text="x", relevant_doc_ids={f"d{i}": 1.0})
               for i in range(9000)]  # more than one 4,096-line chunk
    expected = hashlib.sha256("".join(reference(q) + "\n" for q in queries).encode("utf-8")).hexdigest()
    assert content_hash(queries) == expected


def test_the_c_encoder_serves_on_cpython_and_a_failure_leaves_it_clean() -> None:
    from evret_core.io import hashing
    assert hashing._ENCODE is not None  # CPython has json's C encoder: the fast path is the one measured
    q = QueryExample(query_id="q", query_text="t", relevant_doc_ids={"a": 1.0})
    loop: list[Any] = []
    loop.append(loop)
    q.tags = {"k": loop}  # type: ignore[dict-item]  # a circular value, set after validation
    with pytest.raises(ValueError, match="Circular reference"):  # json.dumps's own error
        canonical_query_json(q)
    q.tags = {"k": object()}  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="not JSON serializable"):
        canonical_query_json(q)
    fine = QueryExample(query_id="q2", query_text="t", relevant_doc_ids={"a": 1.0}, tags={"k": "v"})
    assert canonical_query_json(fine) == reference(fine)  # no stale entry in the circular-reference table
    assert not hashing._MARKERS
