"""Shared pieces for vector-store retriever plugins: query embedders, corpus files in batches, results.

Nothing heavy is imported here: a sentence-transformers model is loaded only when a model name is given, and that
name resolves offline first (:func:`evret_core.retrieve.embedding_models.resolve_model`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from evret_core.contracts.errors import EvretError
from evret_core.contracts.retrieve import RetrievalResult
from evret_core.io.corpus import ID_FIELDS, iter_corpus
from evret_core.retrieve.embedding_models import resolve_model

T = TypeVar("T")

Embedder = Callable[[Sequence[str]], list[list[float]]]
"""Texts in, one vector (a list of floats) per text out."""


def resolve_embedder(embedding: Any, option: str = "embedding") -> Embedder:
    """Turn what a user gave as ``embedding`` into a batch embedder.

    Accepts a LangChain ``Embeddings`` (its ``embed_query`` is used: queries may be embedded differently from
    documents), a sentence-transformers model object or model name/path (loaded lazily), or any callable
    ``list[str] -> list[vector]``.
    """
    if embedding is None:
        raise EvretError(f"option {option!r} is required: a function list[str] -> vectors, a LangChain Embeddings, "
                         f"or a sentence-transformers model name")
    if hasattr(embedding, "embed_query") and hasattr(embedding, "embed_documents"):
        return lambda texts: [_as_floats(embedding.embed_query(t)) for t in texts]
    if isinstance(embedding, (str, Path)):
        return _sentence_transformer(str(embedding), option)
    if hasattr(embedding, "encode") and hasattr(embedding, "get_sentence_embedding_dimension"):
        return lambda texts: [_as_floats(v) for v in embedding.encode(list(texts), show_progress_bar=False)]
    if callable(embedding):
        fn = embedding

        def call(texts: Sequence[str]) -> list[list[float]]:
            vectors = fn(list(texts))
            out = [_as_floats(v) for v in vectors]
            if len(out) != len(texts):
                raise EvretError(f"option {option!r}: the embedding function returned {len(out)} vectors for "
                                 f"{len(texts)} texts; it must take a list of texts and return one vector each")
            return out

        return call
    raise EvretError(f"option {option!r}: cannot embed with a {type(embedding).__name__}; give a function "
                     f"list[str] -> vectors, a LangChain Embeddings, or a sentence-transformers model name")


def _sentence_transformer(name: str, option: str) -> Embedder:
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        raise EvretError(f"option {option!r}: {name!r} names a sentence-transformers model, but "
                         f"sentence-transformers is not installed (pip install sentence-transformers)") from None
    from evret_core.progress import quiet_model_loading

    resolved = resolve_model(name, f"option {option!r}")
    with _MODELS_LOCK:  # an index helper and the retriever after it share one load
        model = _MODELS.get(resolved.source)
        if model is None:
            try:
                with quiet_model_loading():
                    model = _MODELS[resolved.source] = SentenceTransformer(resolved.source,
                                                                           local_files_only=resolved.local)
            except Exception as exc:  # the library raises OSError, ValueError, hub errors...
                raise EvretError(f"option {option!r}: the model {name!r} could not be loaded from "
                                 f"{resolved.source}: {type(exc).__name__}: {exc}") from None
    return lambda texts: [_as_floats(v) for v in model.encode(list(texts), show_progress_bar=False)]


_MODELS: dict[str, Any] = {}
_MODELS_LOCK = threading.Lock()


def _as_floats(vector: Any) -> list[float]:
    if hasattr(vector, "tolist"):
        vector = vector.tolist()
    try:
        return [float(x) for x in vector]
    except (TypeError, ValueError):
        raise EvretError(f"an embedding is not a vector of numbers: {str(vector)[:80]}") from None


def read_corpus_file(path: str | Path) -> Iterator[dict[str, Any]]:
    """Yield ``{"doc_id", "text", "metadata"}`` records from a JSONL corpus file, as it is read.

    The file is read by :func:`evret_core.io.corpus.iter_corpus` (BEIR's corpus format; errors name the file and
    line). The text indexed is the title and the text joined by a space, as BEIR's "flat" baselines do; the
    record's other fields, the title among them, become the metadata.
    """
    for _where, doc_id, record in iter_corpus(path):
        title, text = record.get("title"), record["text"]
        full = f"{title} {text}".strip() if title else text
        metadata = {k: v for k, v in record.items() if k not in (*ID_FIELDS, "text")}
        yield {"doc_id": doc_id, "text": full, "metadata": metadata}


def batched(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """``items`` in lists of ``size`` (the last one shorter), read lazily."""
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def corpus_batches(corpus: str | Path | Iterable[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    """An index helper's corpus (a JSONL file, or records ``{doc_id, text, metadata}``) in batches of ``size``."""
    return batched(read_corpus_file(corpus) if isinstance(corpus, (str, Path)) else corpus, size)


def distance_result(doc_id: Any, text: str, distance: float, metadata: dict[str, Any]) -> RetrievalResult:
    """A result scored by the negated distance (higher is better), the text and the distance kept in metadata."""
    return RetrievalResult(doc_id=str(doc_id), score=-float(distance),
                           metadata={**metadata, "text": text, "distance": float(distance)})


def load_object(spec: str, owner: str, option: str = "object") -> Any:
    """Import ``"package.module:attribute"`` (dots in the attribute walk into it) for the retriever option
    ``option`` of ``owner`` (``"langchain retriever"``); call it when it is a zero-argument factory function.
    Errors are :class:`EvretError`s naming the owner, the option and the spec."""
    import importlib
    import inspect

    where = f"{owner}: option {option!r} {spec!r}"
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise EvretError(f"{where}: write it as 'package.module:attribute'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise EvretError(f"{where}: cannot import {module_name!r}: {exc}") from None
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise EvretError(f"{where}: {module_name!r} has no {attr!r}")
        obj = getattr(obj, part)
    if inspect.isfunction(obj):
        obj = obj()
    return obj


class QueryVectors:
    """The query vectors of a vector-store retriever: from ``embedding`` (anything :func:`resolve_embedder`
    takes) or, when it is None, from ``query_embeddings`` (query text -> vector, computed elsewhere). ``label`` is
    what the retriever's config records; a query with no vector is an :class:`EvretError` naming ``owner``."""

    def __init__(self, embedding: Any, query_embeddings: Any, owner: str) -> None:
        self.owner = owner
        self.embed = resolve_embedder(embedding) if embedding is not None else None
        self.label = (embedding if isinstance(embedding, str) else
                      "query_embeddings" if embedding is None else type(embedding).__name__)
        # made floats once here (a bad vector fails before any search), not again for every search
        self.query_embeddings: dict[str, list[float]] = {}
        for query, vector in (query_embeddings or {}).items():
            try:
                self.query_embeddings[str(query)] = _as_floats(vector)
            except EvretError:
                raise EvretError(f"{owner}: option 'query_embeddings': the vector for the query {str(query)[:80]!r} "
                                 f"is not a vector of numbers: {str(vector)[:80]}") from None

    def __call__(self, queries: list[str]) -> list[list[float]]:
        if self.embed is not None:
            return self.embed(queries)
        missing = [q for q in queries if q not in self.query_embeddings]
        if missing:
            raise EvretError(f"{self.owner}: option 'query_embeddings' has no vector for the query "
                             f"{missing[0][:80]!r} ({len(missing)} queries missing)")
        return [self.query_embeddings[q] for q in queries]
