"""Answer correctness with the official SQuAD 2.0 semantics, and behaviour (answer / refuse / escalate / clarify).

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

from evret_core.text import STOPWORDS

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


# -- the ``correct`` verdict -------------------------------------------------------------------------------------
SHORT_ANSWER_EXTRA_WORDS = 3
"""An answer is *short* when, besides the gold answer it states, it says at most this many content words (not
stop words, not words of the question): one that states a gold answer whole then counts as right (see
:func:`states_whole`); docs/benchmarks.md has the measurement behind the number."""
_LEADING = frozenset("in on at near by from to of during since about around for with into".split())

_UNITS = {w: n for n, w in enumerate("""zero one two three four five six seven eight nine ten eleven twelve thirteen
    fourteen fifteen sixteen seventeen eighteen nineteen""".split())}
_TENS = {w: 10 * n for n, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), start=2)}
_SCALES = {"hundred": 100, "thousand": 1_000, "million": 10**6, "billion": 10**9, "trillion": 10**12}
_ORDINAL_WORDS = {w: n for n, w in enumerate("""zeroth first second third fourth fifth sixth seventh eighth ninth tenth
    eleventh twelfth thirteenth fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth twentieth""".split())}
_MONTHS = {w: n for n, w in enumerate("""january february march april may june july august september october
    november december""".split(), start=1)}
_QUANTITY_TOKEN = re.compile(r"\d+(?:,\d{3})+(?![\d,])|\d+(?:\.\d+)?|[A-Za-z]+")


def quantities(text: str) -> frozenset[tuple[str, float]]:
    """The numbers and months a text states, as values: numerals (``1,230``, ``2.5``, ``5pm``, ``10th``,
    ``1990s``), number words (``twelve``, ``twenty-five``, ``two hundred and fifty``, ``a dozen``), ordinal words
    (``first`` to ``twentieth``), a scale after a numeral (``2 million``) and month names written with a capital
    (``May 1945``; a lower-case "may" is a verb). ``("number", 12.0)`` or ``("month", 5.0)``."""
    found: set[tuple[str, float]] = set()
    raw = _QUANTITY_TOKEN.findall(text.replace("-", " "))
    words = [t.lower() for t in raw]
    group: float | None = None  # the number words read so far ("two hundred" -> 200 while waiting for "fifty")
    total = 0.0

    def close() -> None:
        nonlocal group, total
        if group is not None:
            found.add(("number", total + group))
        group, total = None, 0.0

    for i, (token, word) in enumerate(zip(raw, words, strict=True)):
        nxt = words[i + 1] if i + 1 < len(words) else ""
        if token[0].isdigit():
            close()
            value = float(token.replace(",", ""))
            if nxt in _SCALES:
                value *= _SCALES[nxt]
            found.add(("number", value))
        elif word in _UNITS or word in _TENS:
            value = float(_UNITS.get(word, _TENS.get(word, 0)))
            if group is not None and not _joins(group, value):
                close()  # "one two": two numbers; "twenty five" and "two hundred fifty" stay one
            group = (group or 0.0) + value
        elif word in ("a", "an") and nxt in (*_SCALES, "dozen"):
            close()
            group = 1.0
        elif word == "dozen":
            group = (group or 1.0) * 12
        elif word in _SCALES and (group is not None):
            if _SCALES[word] == 100:
                group *= 100
            else:
                total += group * _SCALES[word]
                group = 0.0
        elif word == "and" and group is not None and (nxt in _UNITS or nxt in _TENS):
            continue
        elif word in _ORDINAL_WORDS:
            value = float(_ORDINAL_WORDS[word])
            if group is not None and _joins(group, value):  # "twenty first"; "one ninth" is two numbers
                found.add(("number", total + group + value))
                group, total = None, 0.0
            else:
                close()
                found.add(("number", value))
        else:
            close()
            if word in _MONTHS and token[0].isupper():
                found.add(("month", float(_MONTHS[word])))
    close()
    return frozenset(found)


def _joins(group: float, value: float) -> bool:
    """Whether number word ``value`` continues the number read so far: after a scale ("three thousand four",
    ``group`` 0) or hundreds ("two hundred fifty"), or a unit after tens ("twenty five")."""
    rest = group % 100
    return rest == 0 or (20 <= rest and rest % 10 == 0 and value < 10)


def numbers_disagree(prediction: str, gold: str) -> bool:
    """Whether the prediction states a number or month the gold answer does not while the gold states one the
    prediction does not: "2 euros per item" for "5 euros per item" disagrees; "1945" for "May 1945" (less said) and
    "5 pm, 9 am on Sundays" for "5 pm" (more said) do not."""
    said, gold_values = quantities(prediction), quantities(gold)
    return bool(said - gold_values) and bool(gold_values - said)


def states_whole(prediction: str, gold: str, question: str = "", short: int = SHORT_ANSWER_EXTRA_WORDS) -> bool:
    """Whether the prediction states the gold answer whole, normalised, as one contiguous run of its tokens (a
    leading preposition of the gold may be left out: "1041" for "in 1041"), and is short: the rest offers no
    alternative ("or", see :func:`answer_is_correct`) and holds at most ``short`` content words that are neither
    stop words nor words of ``question`` ("5 pm, and it is closed" states "5 pm" with one, "closed"; "Rollo,
    William, Richard, Robert" does not state "Rollo" shortly)."""
    said = normalize_answer(prediction).split()
    wanted = normalize_answer(gold).split()
    variants = [wanted]
    while len(variants[-1]) > 1 and variants[-1][0] in _LEADING:
        variants.append(variants[-1][1:])
    asked = set(normalize_answer(question).split())
    for run in variants:
        for i in range(len(said) - len(run) + 1):
            if run and said[i: i + len(run)] == run:
                rest = said[:i] + said[i + len(run):]
                extra = [w for w in rest if w not in STOPWORDS and w not in asked]
                return "or" not in rest and len(extra) <= short
    return False


def hedges(prediction: str, gold: str) -> bool:
    """Whether the prediction offers alternatives the gold answer does not: an "or" ("5 pm or 8 pm")."""
    return "or" in normalize_answer(prediction).split() and "or" not in normalize_answer(gold).split()


def answer_is_correct(prediction: str, golds: Sequence[str], correct_f1: float = 0.5, question: str = "",
                      short: int = SHORT_ANSWER_EXTRA_WORDS) -> bool:
    """The default ``correct`` verdict of an answer to ``question`` with gold answers ``golds`` (any one of them
    may be met): against a gold answer whose numbers or months the prediction does not contradict
    (:func:`numbers_disagree`) and to which it offers no alternative (:func:`hedges`), the prediction matches
    exactly, has token F1 above ``correct_f1``, or states the gold answer whole in a short answer
    (:func:`states_whole`). Exact match and F1 themselves stay SQuAD's."""
    for gold in golds:
        if not normalize_answer(gold) or numbers_disagree(prediction, gold) or hedges(prediction, gold):
            continue
        if exact_match(prediction, gold) or token_f1(prediction, gold) > correct_f1 or states_whole(
                prediction, gold, question, short):
            return True
    return False


def behaviour_of(refused: bool, escalated: bool, clarified: bool = False) -> str:
    """What the generator did: ``clarify`` (it asked the user which one they mean) wins over ``escalate``, which
    wins over ``refuse``, which wins over ``answer``."""
    return "clarify" if clarified else "escalate" if escalated else "refuse" if refused else "answer"


def behaviour_ok(expected: str, refused: bool, escalated: bool, clarified: bool = False) -> bool:
    """Whether the behaviour is right: answer when expected to answer; refuse or escalate when expected to refuse;
    escalate when expected to escalate; ask the user back when expected to clarify."""
    actual = behaviour_of(refused, escalated, clarified)
    if expected == "answer":
        return actual == "answer"
    if expected == "refuse":
        return actual in ("refuse", "escalate")
    if expected == "clarify":
        return actual == "clarify"
    return actual == "escalate"
