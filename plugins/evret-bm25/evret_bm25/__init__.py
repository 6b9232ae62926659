"""Evret plugin registering the ``bm25`` retriever (bm25s, in-process). bm25s is imported only when one is built."""

from __future__ import annotations

from typing import Any

from evret_core.sdk import Dataset, Register, Retriever, hookimpl

__all__ = ["bm25", "register_retrievers"]


def bm25(
    corpus: Any = None,
    dataset: Dataset | None = None,
    k1: float = 0.9,
    b: float = 0.4,
    method: str = "lucene",
    stopwords: str | None = "en",
    stemmer: str | None = "english",
) -> Any:
    """Build a :class:`~evret_bm25.retriever.BM25Retriever` over ``corpus`` (a JSONL path or a mapping id ->
    ``{"title", "text"}``), or over ``dataset.corpus`` when no corpus is given."""
    from evret_bm25.retriever import BM25Retriever

    return BM25Retriever.build(corpus=corpus, dataset=dataset, k1=k1, b=b, method=method,
                               stopwords=stopwords, stemmer=stemmer)


@hookimpl
def register_retrievers(register: Register[Retriever]) -> None:
    register("bm25", bm25)
