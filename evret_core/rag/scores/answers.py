"""Answer correctness with the official SQuAD 2.0 semantics, and behaviour (answer / refuse / escalate).

Exact match and token F1 follow the official SQuAD 2.0 evaluation script's definitions: both texts are normalised
(lower case; punctuation removed; the articles a, an, the removed; whitespace collapsed), F1 is computed over the
normalised tokens with multiplicity, and a question scores the maximum over its gold answers. An unanswerable
question (no gold answers) has the empty string as its only gold answer, so it scores 1 exactly when the prediction
is empty (a refusal predicts the empty string). Scores here are in [0, 1]; the official script prints percentages.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower case, punctuation removed, articles removed, whitespace collapsed (the official order)."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def token_f1(prediction: str, gold: str) -> float:
    """Token F1 of the normalised texts; when either side is empty, 1 if both are, else 0."""
    pred_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    if not pred_tokens or not gold_tokens:
        return float(pred_tokens == gold_tokens)
    common = Counter(pred_tokens) & Counter(gold_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(pred_tokens)
    recall = same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def squad_scores(prediction: str, golds: Sequence[str]) -> tuple[float, float]:
    """``(exact, f1)``: the maxima over ``golds``; no golds means the single gold answer ``""``."""
    candidates = [g for g in golds if normalize_answer(g)] or [""]
    return (max(exact_match(prediction, g) for g in candidates), max(token_f1(prediction, g) for g in candidates))


def behaviour_of(refused: bool, escalated: bool) -> str:
    """What the generator did: ``escalate`` wins over ``refuse``, which wins over ``answer``."""
    return "escalate" if escalated else "refuse" if refused else "answer"


def behaviour_ok(expected: str, refused: bool, escalated: bool) -> bool:
    """Whether the behaviour is right: answer when expected to answer; refuse or escalate when expected to refuse;
    escalate when expected to escalate."""
    actual = behaviour_of(refused, escalated)
    if expected == "answer":
        return actual == "answer"
    if expected == "refuse":
        return actual in ("refuse", "escalate")
    return actual == "escalate"
