"""BM25 over an in-memory corpus with bm25s: index once, retrieve query batches in one call."""

from __future__ import annotations

import gc
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from evret_core.sdk import Dataset, EvretError, RankedColumns, RetrievalResult, Retriever, read_corpus

METHODS = ("robertson", "atire", "bm25l", "bm25+", "lucene")


# the name this plugin has always exported: a JSONL corpus as id -> {"title", "text"}, errors naming file and line
load_corpus = read_corpus


class BM25Retriever(Retriever):
    """Lexical BM25 retrieval with bm25s; title and text are indexed as one field ("flat", as Anserini's BEIR runs).

    ``k1``/``b`` default to Anserini's 0.9/0.4; ``method`` is a bm25s scoring variant (default ``lucene``);
    ``stopwords`` is a bm25s stop-word list name (``en``) or None; ``stemmer`` a Snowball language (``english``)
    or None. Results carry ``metadata["text"]`` and ``metadata["title"]``; documents sharing no term with the
    query are not returned.
    """

    name = "bm25"

    def __init__(
        self,
        corpus: Mapping[str, Mapping[str, Any]],
        k1: float = 0.9,
        b: float = 0.4,
        method: str = "lucene",
        stopwords: str | None = "en",
        stemmer: str | None = "english",
    ) -> None:
        import bm25s
        from bm25s.tokenization import Tokenizer

        try:
            self.k1, self.b = float(k1), float(b)
        except (TypeError, ValueError):
            raise EvretError(f"bm25: options k1 and b must be numbers, got k1={k1!r}, b={b!r}") from None
        if method not in METHODS:
            raise EvretError(f"bm25: option method={method!r} is not one of {', '.join(METHODS)}")
        if not corpus:
            raise EvretError("bm25: the corpus is empty")
        self.method = method
        self.stopwords = None if stopwords in (None, "", "none", False) else str(stopwords)
        self.stemmer_name = None if stemmer in (None, "", "none", False) else str(stemmer)
        stem = None
        if self.stemmer_name is not None:
            import Stemmer

            try:
                stem = Stemmer.Stemmer(self.stemmer_name).stemWord
            except KeyError:
                raise EvretError(
                    f"bm25: option stemmer={stemmer!r} is not a Snowball language "
                    f"(e.g. english, german, french), or none to disable stemming"
                ) from None
        try:
            self._tokenizer = Tokenizer(stopwords=self.stopwords or [], stemmer=stem)
        except ValueError as exc:
            raise EvretError(f"bm25: option stopwords={stopwords!r}: {exc}") from None
        self.doc_ids: list[str] = []
        self._id_array: np.ndarray | None = None  # object arrays of the same strings, built on first column call
        self._text_array: np.ndarray | None = None
        self._texts: list[str] = []
        self._titles: list[str] = []
        for doc_id, record in corpus.items():
            self.doc_ids.append(str(doc_id))
            self._texts.append(str(record.get("text") or ""))
            self._titles.append(str(record.get("title") or ""))
        flat = [f"{title} {text}".strip() for title, text in zip(self._titles, self._texts, strict=True)]
        tokens = self._tokenizer.tokenize(flat, return_as="tuple", show_progress=False)
        self._model = bm25s.BM25(k1=self.k1, b=self.b, method=method)
        self._model.index(tokens, show_progress=False)

    @classmethod
    def build(cls, corpus: Any = None, dataset: Dataset | None = None, **options: Any) -> BM25Retriever:
        """From a corpus file path, a mapping id -> record, or the ``corpus`` of an evaluation dataset."""
        if corpus is None:
            corpus = getattr(dataset, "corpus", None)
            if corpus is None:
                raise EvretError(
                    "bm25: option 'corpus' is missing: give a JSONL corpus file "
                    "(--retriever-option corpus=PATH) or a dataset that carries its corpus (a BEIR folder)"
                )
        elif isinstance(corpus, (str, Path)):
            corpus = load_corpus(corpus)
        elif not isinstance(corpus, Mapping):
            raise EvretError(f"bm25: option 'corpus' must be a file path or a mapping, got {type(corpus).__name__}")
        return cls(corpus, **options)

    def __len__(self) -> int:
        return len(self.doc_ids)

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "k1": self.k1, "b": self.b, "method": self.method,
                "stopwords": self.stopwords, "stemmer": self.stemmer_name, "documents": len(self.doc_ids)}

    def retrieve(self, query: str, k: int) -> list[RetrievalResult]:
        return self.batch_retrieve([query], k)[0]

    def _search(self, queries: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Document indexes and scores, (queries x depth), from one bm25s call."""
        if k <= 0:
            raise EvretError(f"bm25: k must be a positive integer, got {k}")
        depth = min(int(k), len(self.doc_ids))
        query_ids = self._tokenizer.tokenize(list(queries), update_vocab=False, return_as="ids",
                                             show_progress=False)
        docs, scores = self._model.retrieve(query_ids, k=depth, show_progress=False, return_as="tuple")
        return np.asarray(docs), np.asarray(scores, dtype=np.float64)

    def batch_retrieve_columns(self, queries: Sequence[str], k: int) -> list[RankedColumns]:
        """All queries in one bm25s call, as columns: ids and texts are the corpus's own strings picked by index
        (no object per result). Documents sharing no term with the query (score 0) are left out."""
        if not queries:
            return []
        docs, scores = self._search(queries, k)
        if self._id_array is None:
            self._id_array = np.asarray(self.doc_ids, dtype=object)
            self._text_array = np.asarray(self._texts, dtype=object)
        ids, texts = self._id_array, self._text_array
        assert texts is not None
        keep = scores > 0.0
        lengths = keep.sum(axis=1).tolist()
        # bm25s ranks by score, so the kept documents are a prefix of each row
        return [RankedColumns(ids[row[:n]], score[:n], texts[row[:n]])
                for row, score, n in zip(docs, scores, lengths, strict=True)]

    def batch_retrieve(self, queries: Sequence[str], k: int) -> list[list[RetrievalResult]]:
        """All queries in one bm25s call, as result objects carrying ``text`` and ``title`` metadata."""
        if not queries:
            return []
        docs, scores = self._search(queries, k)
        ids, texts, titles = self.doc_ids, self._texts, self._titles
        out: list[list[RetrievalResult]] = []
        # Building ~k x queries small objects triggers the cyclic GC over and over (they hold no cycles):
        # pausing it halves the cost of this loop.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            for row_docs, row_scores in zip(docs.tolist(), scores.tolist(), strict=True):
                out.append([
                    RetrievalResult(doc_id=ids[d], score=s, metadata={"text": texts[d], "title": titles[d]})
                    for d, s in zip(row_docs, row_scores, strict=True)
                    if s > 0.0
                ])
        finally:
            if gc_was_enabled:
                gc.enable()
        return out
