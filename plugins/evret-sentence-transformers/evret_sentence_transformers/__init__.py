"""Evret plugin on sentence-transformers: the ``semantic`` judge, the ``dense`` retriever and the
``semantic-similarity`` output evaluator, all working offline with the packaged all-MiniLM-L6-v2.

Importing this package (which ``evret plugins`` does) never imports torch or sentence-transformers: the model
loads on first use.
"""

from __future__ import annotations

from evret_core.sdk import Register, hookimpl, lazy
from evret_sentence_transformers.judge import SemanticJudge
from evret_sentence_transformers.models import DEFAULT_MODEL, EmbeddingCache, Encoder, resolve_model
from evret_sentence_transformers.retriever import DenseRetriever
from evret_sentence_transformers.similarity import (
    SemanticSimilarityEvaluator,
    semantic_similarities,
    semantic_similarity,
)

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_MODEL",
    "DenseRetriever",
    "EmbeddingCache",
    "Encoder",
    "SemanticJudge",
    "SemanticSimilarityEvaluator",
    "resolve_model",
    "semantic_similarities",
    "semantic_similarity",
]


@hookimpl
def register_judges(register: Register) -> None:
    register("semantic", lazy("evret_sentence_transformers.judge:SemanticJudge"))


@hookimpl
def register_retrievers(register: Register) -> None:
    register("dense", lazy("evret_sentence_transformers.retriever:DenseRetriever"))


@hookimpl
def register_evaluators(register: Register) -> None:
    register("semantic-similarity", lazy("evret_sentence_transformers.similarity:SemanticSimilarityEvaluator"))
