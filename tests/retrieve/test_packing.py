"""Context packing (evret_core/retrieve/packing.py, issue 37): token counts by ~4 characters per token or by a
local Hugging Face tokenizer (one built here offline: a word-level vocabulary saved as a BERT tokenizer folder),
and the greedy fill of a token budget in rank order."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from evret_core.contracts.errors import EvretError
from evret_core.contracts.retrieve import RetrievalResult
from evret_core.retrieve.packing import pack, token_counter

WORDS = ["bees", "make", "wax", "honey", "never", "spoils"]


@pytest.fixture(scope="module")
def tokenizer_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from transformers import BertTokenizerFast

    folder = tmp_path_factory.mktemp("models") / "tiny-tokenizer"
    folder.mkdir()
    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n", encoding="utf-8")
    BertTokenizerFast(vocab_file=str(vocab), do_lower_case=True).save_pretrained(folder)
    return folder


def ranked(*texts: str | None) -> list[RetrievalResult]:
    return [RetrievalResult(doc_id=f"d{i}", score=float(10 - i), metadata={} if t is None else {"text": t})
            for i, t in enumerate(texts)]


@pytest.mark.parametrize("name", [None, "chars"])
def test_the_default_count_is_a_token_per_four_characters_rounded_up(name: str | None) -> None:
    count = token_counter(name)
    assert [count(t) for t in ("", "a", "abcd", "abcde", "x" * 401)] == [0, 1, 1, 2, 101]


def test_a_local_tokenizer_counts_its_tokens_without_the_special_ones(tokenizer_folder: Path) -> None:
    count = token_counter(str(tokenizer_folder))
    assert count("") == 0
    assert count("Bees make wax") == 3  # lower-cased word pieces; [CLS] and [SEP] not counted
    assert count("honey never spoils, bees!") == 6  # punctuation: one [UNK] token each


def test_a_tokenizer_folder_that_is_missing_or_cannot_load_is_named(tmp_path: Path) -> None:
    with pytest.raises(EvretError, match=r"option tokenizer=.*nowhere.*no such tokenizer folder"):
        token_counter(str(tmp_path / "nowhere"))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(EvretError, match=rf"option tokenizer=.*could not load a tokenizer from folder {empty}"):
        token_counter(str(empty))
    with pytest.raises(EvretError, match="option tokenizer="):
        token_counter("  ")


def test_without_transformers_the_error_names_the_option_and_the_install(tokenizer_folder: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "transformers", None)  # what an environment without it imports
    with pytest.raises(EvretError, match=r"option tokenizer=.*needs transformers.*pip install transformers"):
        token_counter(str(tokenizer_folder))
    assert token_counter("chars")("abcdefgh") == 2  # the default needs nothing


def test_pack_keeps_what_fits_in_rank_order_and_skips_what_does_not() -> None:
    count = token_counter(None)
    results = ranked("a" * 20, "b" * 40, "c" * 12, "d" * 8, "")  # 5, 10, 3, 2 and 0 tokens
    assert [r.doc_id for r in pack(results, 10, count)] == ["d0", "d2", "d3", "d4"]  # d1 is skipped: 10 > 5 left
    assert [r.doc_id for r in pack(results, 20, count)] == ["d0", "d1", "d2", "d3", "d4"]
    assert [r.doc_id for r in pack(results, 1, count)] == ["d4"]
    assert pack([], 5, count) == []
    kept = pack(results, 8, count)
    assert kept[0] is results[0]  # the results themselves, unchanged


def test_pack_counts_with_the_tokenizer_it_is_given(tokenizer_folder: Path) -> None:
    count = token_counter(str(tokenizer_folder))
    results = ranked("bees make wax honey", "honey never spoils", "wax")  # 4, 3 and 1 tokens
    assert [r.doc_id for r in pack(results, 5, count)] == ["d0", "d2"]
    assert [r.doc_id for r in pack(results, 5, token_counter("chars"))] == ["d0"]  # 5, 5 and 1 by characters


@pytest.mark.parametrize("budget", [0, -3, 2.5, True, "10", None])
def test_a_bad_budget_is_a_value_error_naming_it(budget: object) -> None:
    with pytest.raises(ValueError, match="budget must be an integer >= 1"):
        pack(ranked("a"), budget, token_counter(None))  # type: ignore[arg-type]


def test_a_result_without_text_is_named() -> None:
    with pytest.raises(EvretError, match="document 'd1' has no text"):
        pack(ranked("abc", None), 10, token_counter(None))
