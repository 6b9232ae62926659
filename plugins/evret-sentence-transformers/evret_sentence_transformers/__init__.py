"""Evret plugin on sentence-transformers: the ``semantic`` and ``query-similarity`` judges, the ``dense`` retriever,
the ``semantic-similarity`` output evaluator and the ``embedding`` reranker, all working offline with the packaged
all-MiniLM-L6-v2, and the ``cross-encoder`` reranker over a cross-encoder model folder.

Importing this package (which ``evret plugins`` does) imports neither torch, sentence-transformers, numpy nor
pydantic: the hooks register lazy factories, the public names below are imported on first use, and the model
loads when it is first needed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from evret_core.sdk import Judge, RecordsEvaluator, Register, Reranker, Retriever, hookimpl, lazy

if TYPE_CHECKING:
    from evret_sentence_transformers.judge import SemanticJudge
    from evret_sentence_transformers.models import DEFAULT_MODEL, EmbeddingCache, Encoder, resolve_model
    from evret_sentence_transformers.query_judge import QuerySimilarityJudge
    from evret_sentence_transformers.rerankers import CrossEncoderReranker, EmbeddingReranker
    from evret_sentence_transformers.retriever import DenseRetriever
    from evret_sentence_transformers.similarity import (
        SemanticSimilarityEvaluator,
        semantic_similarities,
        semantic_similarity,
    )

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_MODEL",
    "CrossEncoderReranker",
    "DenseRetriever",
    "EmbeddingCache",
    "EmbeddingReranker",
    "Encoder",
    "QuerySimilarityJudge",
    "SemanticJudge",
    "SemanticSimilarityEvaluator",
    "resolve_model",
    "semantic_similarities",
    "semantic_similarity",
]

_HOME = {"SemanticJudge": "judge", "QuerySimilarityJudge": "query_judge", "DEFAULT_MODEL": "models",
         "EmbeddingCache": "models", "Encoder": "models",
         "resolve_model": "models", "DenseRetriever": "retriever", "SemanticSimilarityEvaluator": "similarity",
         "semantic_similarities": "similarity", "semantic_similarity": "similarity",
         "CrossEncoderReranker": "rerankers", "EmbeddingReranker": "rerankers"}


def __getattr__(name: str) -> Any:
    """The public names, imported from their modules when first asked for (they import numpy and pydantic)."""
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


@hookimpl
def register_judges(register: Register[Judge]) -> None:
    register("semantic", lazy("evret_sentence_transformers.judge:SemanticJudge"))
    register("query-similarity", lazy("evret_sentence_transformers.query_judge:QuerySimilarityJudge"))


@hookimpl
def register_retrievers(register: Register[Retriever]) -> None:
    register("dense", lazy("evret_sentence_transformers.retriever:DenseRetriever"))


@hookimpl
def register_evaluators(register: Register[RecordsEvaluator]) -> None:
    register("semantic-similarity", lazy("evret_sentence_transformers.similarity:SemanticSimilarityEvaluator"))


@hookimpl
def register_rerankers(register: Register[Reranker]) -> None:
    register("embedding", lazy("evret_sentence_transformers.rerankers:EmbeddingReranker"))
    register("cross-encoder", lazy("evret_sentence_transformers.rerankers:CrossEncoderReranker"))
