"""The RAG harness: score a RAG system's retrieval and generation separately, then jointly.

``RagEvaluator(retriever, generator).evaluate(QuestionSet.load(path))`` answers each question under the gold and
the retrieved context, judges the answers' claims against their contexts, scores correctness (SQuAD 2.0 exact match
and F1), behaviour (refusals) and retrieval, and attributes each failure to the retriever or the generator.
See docs/rag.md.
"""

from evret_core.rag.answers import exact_match, normalize_answer, squad_scores, token_f1
from evret_core.rag.claims import ClaimJudge, ClaimTask, ClaimVerdict, LexicalClaimJudge, claim_scores
from evret_core.rag.contexts import (
    Condition,
    ConditionCase,
    Context,
    GoldCondition,
    PerturbedCondition,
    RetrievedCondition,
)
from evret_core.rag.extractive import ExtractiveGenerator
from evret_core.rag.generators import (
    Answer,
    Claim,
    GenerationRequest,
    Generator,
    PrecomputedGenerator,
    resolve_generator,
)
from evret_core.rag.harness import RagEvaluator
from evret_core.rag.questions import QuestionSet, RagQuestion
from evret_core.rag.results import RagResults
from evret_core.rag.scoring import RagScore, ScoreInput

__all__ = [
    "Answer",
    "Claim",
    "ClaimTask",
    "ClaimJudge",
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
