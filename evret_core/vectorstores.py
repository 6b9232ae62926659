"""Shared pieces for vector-store retriever plugins: query embedders and corpus files.

Nothing heavy is imported here: a sentence-transformers model is loaded only when a model name is given.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from evret_core.errors import EvretError

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
    model = SentenceTransformer(name)
    return lambda texts: [_as_floats(v) for v in model.encode(list(texts), show_progress_bar=False)]


def _as_floats(vector: Any) -> list[float]:
    if hasattr(vector, "tolist"):
        vector = vector.tolist()
    try:
        return [float(x) for x in vector]
    except (TypeError, ValueError):
        raise EvretError(f"an embedding is not a vector of numbers: {str(vector)[:80]}") from None


def read_corpus_file(path: str | Path) -> Iterator[dict[str, Any]]:
    """Yield ``{"doc_id", "text", "metadata"}`` records from a JSONL corpus file.

    Each line is an object with an id (``_id``, ``doc_id`` or ``id``) and ``text``, optionally ``title`` (BEIR's
    corpus format): the text indexed is the title and the text joined by a space, as BEIR's "flat" baselines do.
    Errors name the file and line.
    """
    path = Path(path)
    if not path.is_file():
        raise EvretError(f"{path}: no such corpus file")
    with path.open(encoding="utf-8-sig") as handle:
        for lineno, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise EvretError(f"{where}: invalid JSON ({exc.msg} at column {exc.colno})") from None
            if not isinstance(record, dict):
                raise EvretError(f"{where}: expected a JSON object")
            doc_id = next((record[key] for key in ("_id", "doc_id", "id") if record.get(key) not in (None, "")), None)
            if doc_id is None:
                raise EvretError(f"{where}: the record has no '_id', 'doc_id' or 'id' field")
            text = record.get("text")
            if not isinstance(text, str):
                raise EvretError(f"{where}: field 'text' is missing or not a string")
            title = record.get("title")
            full = f"{title} {text}".strip() if isinstance(title, str) and title else text
            metadata = {k: v for k, v in record.items() if k not in ("_id", "doc_id", "id", "text")}
            yield {"doc_id": str(doc_id), "text": full, "metadata": metadata}
