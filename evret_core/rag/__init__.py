"""The RAG harness: score a RAG system's retrieval and generation separately, then jointly.

``RagEvaluator(retriever, generator).evaluate(QuestionSet.load(path))`` answers each question under the gold and
the retrieved context, judges the answers' claims against their contexts, scores correctness (SQuAD 2.0 exact match
and F1), behaviour (refusals) and retrieval, and attributes each failure to the retriever or the generator.
See docs/rag.md.
"""

from __future__ import annotations

from evret_core.contracts.claims import ClaimJudge, ClaimTask, ClaimVerdict
from evret_core.contracts.generation import Answer, Claim, Context, GenerationRequest, Generator
from evret_core.contracts.perturb import ConditionCase
from evret_core.contracts.rag_score import RagScore, ScoreInput
from evret_core.rag.claims.claim_judges import LexicalClaimJudge, claim_scores
from evret_core.rag.generate.extractive import ExtractiveGenerator
from evret_core.rag.generate.generators import PrecomputedGenerator, resolve_generator
from evret_core.rag.harness import RagEvaluator
from evret_core.rag.questions.conditions import (
    Condition,
    GoldCondition,
    PerturbedCondition,
    RetrievedCondition,
)
from evret_core.rag.questions.question_sets import QuestionSet, RagQuestion
from evret_core.rag.scores.answers import exact_match, normalize_answer, squad_scores, token_f1
from evret_core.results.rag_results import RagResults

__all__ = [
    "Answer",
    "Claim",
    "ClaimJudge",
    "ClaimTask",
    "ClaimVerdict",
    "Condition",
    "ConditionCase",
    "Context",
    "ExtractiveGenerator",
    "GenerationRequest",
    "Generator",
    "GoldCondition",
    "LexicalClaimJudge",
    "PerturbedCondition",
    "PrecomputedGenerator",
    "QuestionSet",
    "RagEvaluator",
    "RagQuestion",
    "RagResults",
    "RagScore",
    "RetrievedCondition",
    "ScoreInput",
    "claim_scores",
    "exact_match",
    "normalize_answer",
    "resolve_generator",
    "squad_scores",
    "token_f1",
]
