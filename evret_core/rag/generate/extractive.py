"""The ``extractive`` generator: a deterministic, offline baseline that answers from the context sentences.

For each context sentence it scores the share of the question's content words (stop words removed, a plural ``s``
dropped) that the sentence contains, each word weighted by how rare it is among the sentences seen (so "Normans"
counts for more than "century" in an article about Normans). The best sentence becomes the one claim, citing its
context; below ``threshold`` it refuses. The answer text is that sentence (``answer="sentence"``) or, by default, the
longest run of its words that the question does not contain (``answer="span"``): the classic sliding-window
baseline for span questions, helped by the question's type ("When were the Normans in Normandy?" -> "10th and 11th
centuries gave their name": a run with a number, next to the question's words; F1 0.73 against the gold answer).

With ``answer="sentence"`` or ``"span"`` the claim is a sentence copied from the context it cites, so groundedness,
faithfulness and citation precision are 1.0 by construction. ``answer="paraphrase"`` is the offline baseline whose
claims can fail them: the answer text is the span, and the claim restates the question with the span in its own
words ("the Normans in Normandy: 10th and 11th centuries"), citing the best sentence's context and the runner-up's
(when another context holds it), as a paraphrasing model would; a claim whose question words its context does not
hold is unsupported, and a runner-up citation that does not support it lowers citation precision.

A turn of a conversation is answered from its own message alone: the generator ignores the history
(``GenerationRequest.history``), never asks the user back, and so is the baseline a conversation-aware generator
should beat on turns that refer to earlier ones.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from evret_core.contracts.errors import EvretError
from evret_core.contracts.generation import Answer, Claim, GenerationRequest, Generator
from evret_core.text import (
    NAME_CUES,
    NUMBER_CUES,
    NUMBER_WORDS,
    STOPWORDS,
    WORD,
    content_words,
    split_sentences,
    stem,
)

ANSWER_MODES = ("span", "sentence", "paraphrase")


class ExtractiveGenerator(Generator):
    """Answer with the context sentence that best covers the question; refuse when none covers ``threshold``.

    :param threshold: the weighted share of question words a sentence must contain to be answered from, in [0, 1].
    :param answer: ``span`` (the longest run of sentence words not in the question) or ``sentence``.
    """

    name = "extractive"

    def __init__(self, threshold: float = 0.5, answer: str = "span") -> None:
        try:
            threshold = float(threshold)
        except (TypeError, ValueError):
            raise EvretError(f"extractive generator: threshold must be a number, got {threshold!r}") from None
        if not 0.0 <= threshold <= 1.0:  # NaN fails too
            raise EvretError(f"extractive generator: threshold must be in [0, 1], got {threshold}")
        if answer not in ANSWER_MODES:
            raise EvretError(f"extractive generator: answer must be one of {', '.join(ANSWER_MODES)}, got {answer!r}")
        self.threshold = threshold
        self.answer = answer

    def generate(self, request: GenerationRequest) -> Answer:
        best = self.best_sentence(request.question, [(c.doc_id, c.text) for c in request.contexts])
        if best is None or best[0] < self.threshold:
            score = 0.0 if best is None else best[0]
            return Answer(text="", refused=True, metadata={"score": round(score, 6)})
        score, doc_id, sentence = best
        text = sentence if self.answer == "sentence" else answer_span(sentence, request.question)
        claim = Claim(text=sentence, citations=[doc_id])
        if self.answer == "paraphrase":
            ranked = self.ranked_sentences(request.question, [(c.doc_id, c.text) for c in request.contexts])
            runner_up = next((d for _s, d, _t in ranked[1:] if d != doc_id), None)
            claim = Claim(text=restate(request.question, text),
                          citations=[doc_id] + ([runner_up] if runner_up is not None else []))
        return Answer(text=text, claims=[claim], metadata={"score": round(score, 6)})

    def best_sentence(self, question: str, contexts: Sequence[tuple[str, str]]) -> tuple[float, str, str] | None:
        """``(score, context id, sentence)`` of the best-covering sentence (first one on ties), or None."""
        ranked = self.ranked_sentences(question, contexts)
        return ranked[0] if ranked else None

    def ranked_sentences(self, question: str, contexts: Sequence[tuple[str, str]]) -> list[tuple[float, str, str]]:
        """Every ``(score, context id, sentence)``, best first (in context order on ties)."""
        wanted = list(dict.fromkeys(content_words(question)))
        sentences = [(doc_id, s) for doc_id, text in contexts for s in split_sentences(text)]
        if not wanted or not sentences:
            return []
        bags = [set(content_words(s)) for _, s in sentences]
        df = Counter(w for bag in bags for w in bag if w in wanted)
        n = len(bags)
        weights = {w: math.log(1.0 + (n + 1) / (df[w] + 0.5)) for w in wanted}
        total = sum(weights.values())
        scored = [(sum(weights[w] for w in wanted if w in bag) / total, i, doc_id, sentence)
                  for i, ((doc_id, sentence), bag) in enumerate(zip(sentences, bags, strict=True))]
        scored.sort(key=lambda x: (-x[0], x[1]))
        return [(score, doc_id, sentence) for score, _i, doc_id, sentence in scored]

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "threshold": self.threshold, "answer": self.answer}


_WH = re.compile(r"^\s*(?:(?:in|on|at|by|from|to|for|of|during|since|after|before) )?(?:what|which|who|whom|whose|"
                 r"when|where|why|how(?: many| much| long| far| old| big| large| often)?)\b\s*"
                 r"(?:(?:is|was|were|are|did|does|do|has|have|had|can|could|would|will)\b\s*)?", re.IGNORECASE)


def restate(question: str, answer: str) -> str:
    """The question as a statement with its answer, in other words than any context's: the question without its
    wh-word, auxiliary and question mark, then a colon and the answer ("When were the Normans in Normandy?",
    "10th century" -> "the Normans in Normandy: 10th century")."""
    rest = _WH.sub("", question.strip()).rstrip(" ?").strip()
    return f"{rest}: {answer}" if rest else answer


def answer_span(sentence: str, question: str) -> str:
    """A short span of ``sentence`` that answers ``question``: among the runs of the sentence's words that the
    question does not contain (stop words neither break nor end a run), the one with the best score, where a run
    scores for holding a number (or a number word) when the question asks when / how many, for a capitalised word
    when it asks who / where / which, for being close to the question's words in the sentence, and against its
    length. A run never cuts a bracket or quote pair (:func:`balance_span`). The whole sentence when every word is
    in the question."""
    asked = {w.lower() for w in WORD.findall(question)} | {stem(w) for w in WORD.findall(question)}
    words = list(WORD.finditer(sentence))
    in_question = [w.group().lower() in asked or stem(w.group()) in asked for w in words]
    anchors = [i for i, hit in enumerate(in_question) if hit and words[i].group().lower() not in STOPWORDS]
    lowered = question.lower()
    wants_number = any(cue in lowered for cue in NUMBER_CUES)
    wants_name = not wants_number and any(cue in lowered for cue in NAME_CUES)
    pairs = bracket_pairs(sentence)
    best: tuple[float, int, int] | None = None
    i = 0
    while i < len(words):
        if in_question[i]:
            i += 1
            continue
        start = i
        while i < len(words) and not in_question[i]:
            i += 1
        first, end = start, i
        while end > first and words[end - 1].group().lower() in STOPWORDS:
            end -= 1
        while first < end and words[first].group().lower() in STOPWORDS:
            first += 1
        if end <= first:
            continue
        left, right = balance_span(words[first].start(), words[end - 1].end(), pairs)
        run = [w.group() for w in words if left <= w.start() and w.end() <= right]
        if not run or not sentence[left:right].strip():
            continue
        score = -0.08 * len(run)
        if wants_number and any(w.lower() in NUMBER_WORDS or any(ch.isdigit() for ch in w) for w in run):
            score += 2.0
        if wants_name and any(w[0].isupper() for w in run):
            score += 1.0
        if anchors:
            score -= 0.1 * min(min(abs(a - first), abs(a - (end - 1))) for a in anchors)
        if best is None or score > best[0]:
            best = (score, left, right)
    if best is None:
        return sentence.strip()
    _, left, right = best
    return sentence[left:right].strip()


_OPENERS = {"(": ")", "[": "]", "{": "}", "\u201c": "\u201d", "\u2018": "\u2019"}
_CLOSERS = {close: open_ for open_, close in _OPENERS.items()}
_REACH = 40  # how far (characters) a span may grow to take in the other half of a bracket pair


def bracket_pairs(text: str) -> dict[int, int]:
    """Position of each bracket or quote mark of ``text`` -> the position of its partner: ``()``, ``[]``, ``{}``,
    curly quotes nested by a stack; straight double quotes paired in order (1st with 2nd, 3rd with 4th). A mark
    without a partner is left out (it cannot be balanced, so it does not constrain spans). A curly right single
    quote that no left one opened is an apostrophe and is left out too."""
    pairs: dict[int, int] = {}
    stack: list[tuple[str, int]] = []
    quote: int | None = None
    for pos, ch in enumerate(text):
        if ch in _OPENERS:
            stack.append((ch, pos))
        elif ch in _CLOSERS:
            for depth in range(len(stack) - 1, -1, -1):
                if stack[depth][0] == _CLOSERS[ch]:
                    pairs[stack[depth][1]], pairs[pos] = pos, stack[depth][1]
                    del stack[depth:]
                    break
        elif ch == '"':
            if quote is None:
                quote = pos
            else:
                pairs[quote], pairs[pos] = pos, quote
                quote = None
    return pairs


def balance_span(start: int, end: int, pairs: dict[int, int]) -> tuple[int, int]:
    """``[start, end)`` adjusted so that no bracket or quote pair is cut: a mark inside whose partner lies outside
    makes the span grow to the partner when it is within a short reach, else shrink to leave the mark out
    ("T(n" -> "T(n)"; "n) that solves" -> "that solves" when the opening bracket is far). Repeated until stable."""
    changed = True
    while changed and start < end:
        changed = False
        for pos in range(start, end):
            partner = pairs.get(pos)
            if partner is None or start <= partner < end:
                continue
            if partner >= end:
                if partner - end < _REACH:
                    end = partner + 1
                else:
                    end = pos
            elif start - partner <= _REACH:
                start = partner
            else:
                start = pos + 1
            changed = True
            break
    return start, end
