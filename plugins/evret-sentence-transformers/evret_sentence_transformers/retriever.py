"""The ``dense`` retriever: exact cosine top-k over a sentence-transformers embedding of a corpus, with numpy."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from evret_core.sdk import Dataset, EvretError, RankedColumns, RetrievalResult, Retriever, check_bool
from evret_core.sdk import read_corpus as read_core_corpus
from evret_sentence_transformers.devices import AUTO
from evret_sentence_transformers.models import DEFAULT_MODEL, Encoder, cache_dir

# Score matrices are computed this many cells at a time (float32: 128 MiB), whatever the corpus size.
_BLOCK_CELLS = 1 << 25


def read_corpus(path: str | os.PathLike[str]) -> tuple[list[str], list[str], list[str]]:
    """Ids, titles and texts of a JSONL corpus (read by :func:`evret_core.io.corpus.read_corpus`: errors name the
    file and line); a folder means its ``corpus.jsonl`` (BEIR layout)."""
    path = Path(path).expanduser()
    if path.is_dir():
        path = path / "corpus.jsonl"
    return corpus_from_mapping(read_core_corpus(path), f"dense retriever: corpus {path}")


def corpus_from_mapping(corpus: Mapping[str, Any], where: str) -> tuple[list[str], list[str], list[str]]:
    """Ids, titles and texts of a corpus given as ``{id: {"title": ..., "text": ...}}`` (or ``{id: text}``)."""
    ids: list[str] = []
    titles: list[str] = []
    texts: list[str] = []
    for doc_id, doc in corpus.items():
        if isinstance(doc, str):
            title, text = "", doc
        elif isinstance(doc, Mapping) and isinstance(doc.get("text"), str):
            title, text = str(doc.get("title") or ""), doc["text"]
        else:
            raise EvretError(f"{where}: document {doc_id!r} has no 'text'")
        ids.append(str(doc_id))
        titles.append(title)
        texts.append(text)
    if not ids:
        raise EvretError(f"{where}: the corpus has no documents")
    return ids, titles, texts


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in text)[:80]


class DenseRetriever(Retriever):
    """Dense baseline beside ``bm25``: embeds every document (title + text) and ranks by exact cosine.

    :param corpus: a JSONL corpus file or a BEIR folder; without it, ``dataset.corpus`` is used.
    :param dataset: the :class:`~evret_core.io.datasets.EvaluationDataset` being evaluated (the CLI passes it).
    :param embeddings: where to keep the document embeddings (``.npz``); default next to the corpus file
        (``<corpus>.<model>.embeddings.npz``), or the Evret cache folder for a dataset's corpus or a read-only
        folder. A saved file is reused when its model and corpus hash match, and rewritten otherwise.
    :param save_embeddings: set False to keep the embeddings in memory only.
    :param device, batch_size, fp16: ``"auto"`` (CUDA, then MPS, then CPU), a batch for the device, half precision
        on CUDA only (:mod:`evret_sentence_transformers.devices`); the ones used are in :meth:`config`.
    """

    name = "dense"

    def __init__(
        self,
        corpus: str | os.PathLike[str] | None = None,
        dataset: Dataset | None = None,
        model: str | os.PathLike[str] = DEFAULT_MODEL,
        device: str = AUTO,
        batch_size: int | None = None,
        embeddings: str | os.PathLike[str] | None = None,
        save_embeddings: bool = True,
        fp16: bool = False,
    ) -> None:
        if corpus is not None:
            self.corpus_path: Path | None = Path(corpus).expanduser()
            self.ids, self.titles, self.texts = read_corpus(self.corpus_path)
            if self.corpus_path.is_dir():
                self.corpus_path = self.corpus_path / "corpus.jsonl"
        else:
            data = getattr(dataset, "corpus", None)
            if not data:
                raise EvretError(
                    "dense retriever: no corpus; give corpus=<file.jsonl or BEIR folder>, or evaluate a dataset "
                    "that has one (a BEIR folder)"
                )
            self.corpus_path = None
            self.ids, self.titles, self.texts = corpus_from_mapping(data, "dense retriever: dataset corpus")
        self.encoder = Encoder(model, device=device, batch_size=batch_size, what="dense retriever: option 'model'",
                               fp16=fp16)
        self.embeddings_path = Path(embeddings).expanduser() if embeddings is not None else None
        self.save_embeddings = check_bool(save_embeddings, "dense retriever: option 'save_embeddings'")
        self._matrix: np.ndarray | None = None
        self._id_array: np.ndarray | None = None  # object arrays of the same strings, for column results
        self._text_array: np.ndarray | None = None
        self.embeddings_source: str | None = None  # "loaded" or "computed", once indexed
        self.saved_to: Path | None = None

    # -- indexing ----------------------------------------------------------------------------------------------
    def corpus_hash(self) -> str:
        """SHA-256 over the documents in order (id, title, text): what the saved embeddings were made from."""
        digest = hashlib.sha256()
        for record in zip(self.ids, self.titles, self.texts, strict=True):
            digest.update(json.dumps(record, ensure_ascii=False).encode("utf-8"))
            digest.update(b"\n")
        return digest.hexdigest()

    def index_key(self) -> str:
        return hashlib.sha256(f"{self.encoder.model_key}\n{self.corpus_hash()}".encode()).hexdigest()

    def _default_path(self, key: str) -> Path:
        if self.embeddings_path is not None:
            return self.embeddings_path
        model_slug = _slug(self.encoder.model_key.split(":", 1)[0])
        if self.corpus_path is not None:
            return self.corpus_path.with_name(f"{self.corpus_path.stem}.{model_slug}.embeddings.npz")
        return cache_dir() / "dense" / f"{model_slug}.{key[:24]}.embeddings.npz"

    def _load(self, path: Path, key: str) -> np.ndarray | None:
        try:
            with np.load(path, allow_pickle=False) as saved:
                if str(saved["key"]) != key or saved["ids"].tolist() != self.ids:
                    return None
                matrix = np.ascontiguousarray(saved["embeddings"], dtype=np.float32)
        except (OSError, KeyError, ValueError):
            return None
        return matrix if matrix.shape[0] == len(self.ids) else None

    def _save(self, path: Path, key: str, matrix: np.ndarray) -> Path | None:
        candidates = [path]
        if self.embeddings_path is None and self.corpus_path is not None:
            candidates.append(cache_dir() / "dense" / f"{path.stem}.{key[:24]}.npz")
        for target in candidates:
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(prefix=target.name, suffix=".tmp", dir=target.parent)
                try:
                    with os.fdopen(fd, "wb") as handle:
                        np.savez(handle, key=np.array(key), ids=np.array(self.ids, dtype=str), embeddings=matrix)
                    os.replace(tmp, target)  # atomic: a crash never leaves a half-written file in place
                finally:
                    if os.path.exists(tmp):
                        os.unlink(tmp)
                return target
            except OSError:
                if self.embeddings_path is not None:
                    raise EvretError(f"dense retriever: embeddings {target}: cannot be written") from None
                continue  # a read-only corpus folder: fall back to the cache folder
        return None

    def index(self) -> np.ndarray:
        """The unit-length document embeddings: loaded from the saved file when it matches, else computed."""
        if self._matrix is not None:
            return self._matrix
        key = self.index_key()
        path = self._default_path(key)
        fallback = cache_dir() / "dense" / f"{path.stem}.{key[:24]}.npz"
        for candidate in (path, fallback):
            if candidate.is_file():
                matrix = self._load(candidate, key)
                if matrix is not None:
                    self._matrix, self.embeddings_source, self.saved_to = matrix, "loaded", candidate
                    return matrix
        docs = [f"{title} {text}".strip() if title else text for title, text in zip(self.titles, self.texts,
                                                                                    strict=True)]
        matrix = self.encoder.encode(docs)
        self._matrix, self.embeddings_source = matrix, "computed"
        if self.save_embeddings:
            self.saved_to = self._save(path, key, matrix)
        return matrix

    # -- retrieval ---------------------------------------------------------------------------------------------
    def top_k(self, query_vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Row indices and cosines of the ``k`` best documents per query, best first (ties: corpus order)."""
        matrix = self.index()
        n = matrix.shape[0]
        k = min(int(k), n)
        rows = max(1, _BLOCK_CELLS // max(n, 1))
        all_idx = np.empty((len(query_vectors), k), dtype=np.int64)
        all_scores = np.empty((len(query_vectors), k), dtype=np.float32)
        for start in range(0, len(query_vectors), rows):
            scores = query_vectors[start : start + rows] @ matrix.T
            if k < n:
                top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
            else:
                top = np.broadcast_to(np.arange(n), scores.shape).copy()
            top_scores = np.take_along_axis(scores, top, axis=1)
            order = np.lexsort((top, -top_scores), axis=1)
            all_idx[start : start + rows] = np.take_along_axis(top, order, axis=1)
            all_scores[start : start + rows] = np.take_along_axis(top_scores, order, axis=1)
        return all_idx, all_scores

    def _search(self, queries: Sequence[str], k: int) -> tuple[list[int], np.ndarray, np.ndarray]:
        """Each query's row in (indexes, scores): distinct queries are encoded once."""
        if int(k) <= 0:
            raise EvretError(f"dense retriever: k must be a positive integer, got {k}")
        distinct = list(dict.fromkeys(queries))
        idx, scores = self.top_k(self.encoder.encode(distinct), k)
        position = {q: i for i, q in enumerate(distinct)}
        return [position[q] for q in queries], idx, scores

    def batch_retrieve_columns(self, queries: Sequence[str], k: int) -> list[RankedColumns]:
        """Ranked columns per query: the corpus's ids and texts picked by index, no object per result."""
        queries = [str(q) for q in queries]
        if not queries:
            return []
        rows, idx, scores = self._search(queries, k)
        if self._id_array is None:
            self._id_array = np.asarray(self.ids, dtype=object)
            self._text_array = np.asarray(self.texts, dtype=object)
        ids, texts = self._id_array, self._text_array
        assert texts is not None
        wide = scores.astype(np.float64)
        return [RankedColumns(ids[idx[r]], wide[r], texts[idx[r]]) for r in rows]

    def batch_retrieve(self, queries: Sequence[str], k: int) -> list[list[RetrievalResult]]:
        queries = [str(q) for q in queries]
        if not queries:
            return []
        rows, idx, scores = self._search(queries, k)
        out = []
        for row in rows:
            results = []
            for doc, score in zip(idx[row].tolist(), scores[row].tolist(), strict=True):
                metadata: dict[str, Any] = {"text": self.texts[doc]}
                if self.titles[doc]:
                    metadata["title"] = self.titles[doc]
                results.append(RetrievalResult(doc_id=self.ids[doc], score=float(score), metadata=metadata))
            out.append(results)
        return out

    def retrieve(self, query: str, k: int) -> list[RetrievalResult]:
        return self.batch_retrieve([query], k)[0]

    def config(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "model": self.encoder.model_name,
            "corpus": str(self.corpus_path) if self.corpus_path else "dataset",
            "documents": len(self.ids),
            **self.encoder.settings(),
        }

    def stats(self) -> dict[str, Any]:
        return {**self.encoder.stats(), "embeddings": self.embeddings_source,
                "embeddings_path": str(self.saved_to) if self.saved_to else None}
