"""The ``counterfactual`` adversarial family: one context states a wrong value of the answer's own type.

Two sources of the wrong value, in order:

1. The question's own (``counterfactual_answers`` / ``counterfactual_passages``, as counterfactual-robustness sets
   such as RGB carry them): its fact-altered passages join the contexts as they are; with a fake answer but no
   passages, the fake answer replaces the answer span in a copy of the gold document.
2. Otherwise a value planted by the family in a copy of the gold document's answer span, by the first rule that
   finds one (``info["rule"]``):

   - ``same-head`` (names and phrases of two or more words): a phrase with the same head noun and as many words
     before it, capitalised alike, from the corpus or another answer ("Swiss-Austrian border" -> "Franco-German
     border", "Middle Rhine" -> "Upper Rhine"; :func:`~evret_core.rag.perturb.answer_types.head_of`);
   - ``question-head`` (names and phrases): another answer whose "what / which" question asks for the same noun
     ("Which border..." -> an answer to another "which border" question;
     :func:`~evret_core.rag.perturb.answer_types.question_head`);
   - ``same-type``: another question's answer of the same type
     (:func:`~evret_core.rag.perturb.answer_types.value_type`: a person for a person, a river for a river, a city for
     a city, a date of the same format for a date, a number with the same unit for a number), only when that type
     says what the value is (:func:`~evret_core.rag.perturb.answer_types.typed`);
   - ``shifted``: a date or number with its own numerals moved.

   Every value has the original's string-only shape (:func:`~evret_core.rag.perturb.answer_types.shape`), is never an
   acceptable answer, never inside one, never already in the document and never a substring of the question. No
   such value: the case is skipped, with the reason (a phrase whose question asks for nothing in particular is
   skipped rather than given any other phrase).

The forged document joins the other contexts at a seeded position, so one document contradicts the rest; the right
behaviour is still to answer correctly (ideally flagging the conflict). ``info`` records what was planted, where,
from which question, and :func:`~evret_core.rag.perturb.answer_types.check_planting`'s verdict on its type, each
value typed by the question it answers.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from evret_core.contracts.generation import Context
from evret_core.contracts.perturb import ConditionCase
from evret_core.rag.perturb.answer_types import (
    check_planting,
    head_of,
    question_head,
    shape,
    typed,
    value_type,
)
from evret_core.rag.perturb.perturbations import POSITIONS, _doc_id, _insert
from evret_core.rag.questions.question_sets import QuestionSet, RagQuestion
from evret_core.rag.scores.answers import normalize_answer

# one pool entry: (value, the question it answers, its refined type, its shape)
_Entry = tuple[str, str, tuple[str, str], tuple[str, str]]


def find_span(text: str, question: RagQuestion, doc_id: str, questions: QuestionSet) -> tuple[int, int] | None:
    """Where the answer sits in the gold document's text: SQuAD's recorded offset when it checks out, else the
    first whole-word occurrence of an acceptable answer string."""
    record = questions.corpus.get(doc_id) or {}
    shift = len(record.get("title") or "") + 1 if record.get("title") else 0
    for item in question.metadata.get("answer_spans") or []:
        if isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[0], str) and isinstance(item[1], int):
            start = item[1] + shift
            if text[start : start + len(item[0])] == item[0]:
                return start, start + len(item[0])
    for answer in sorted(question.answer_strings, key=len, reverse=True):
        for flags in (0, re.IGNORECASE):
            m = re.search(rf"(?<!\w){re.escape(answer)}(?!\w)", text, flags)
            if m:
                return m.start(), m.end()
    return None


def value_pool(questions: QuestionSet) -> list[_Entry]:
    """Every answerable question's canonical answer, typed with its own question (unanswerable questions'
    ``plausible_answers`` are left out: in SQuAD they are often fragments such as 'Amer')."""
    out: list[_Entry] = []
    seen: set[str] = set()
    for q in questions.questions:
        if q.expected_behaviour != "answer" or not q.answers:
            continue
        value = q.canonical_answers[0].strip().strip(".,;:\"'")
        if value.count('"') % 2 or value.count("(") != value.count(")"):
            continue  # a span cut through a quote or bracket in the source data
        if value and value not in seen:
            seen.add(value)
            out.append((value, q.question_id, value_type(value, q.question), shape(value)))
    return out


_CORPUS_TOKEN = re.compile(r"[\w'\u2019-]+|[^\w\s]")
_NOT_MODIFIER = frozenset("""the a an of and or to in on for from at by with into is was are were be been has had
    have its their his her this that these those it they there which who whom whose when where also not no as than
    but some any all each more most many much such through across along near between over under about against among
    around behind below beside beyond during inside outside toward towards upon within without via per""".split())
# "German Rhein", "Dutch Rijn": a language word before a name gives the name in that language, not another one
_LANGUAGES = frozenset("""english german dutch french latin italian spanish greek celtic gaulish frankish norse
    flemish frisian romansh danish swedish norwegian polish russian arabic welsh irish""".split())


def corpus_heads(questions: QuestionSet, heads: set[str]) -> dict[str, set[tuple[str, ...]]]:
    """For each head noun in ``heads`` (lower-cased), the phrases of the corpus that end in it: the head as written
    and up to three words before it (no function word, no punctuation), as word tuples; one pass over the corpus."""
    out: dict[str, set[tuple[str, ...]]] = {}
    for doc_id in questions.corpus:
        toks = _CORPUS_TOKEN.findall(questions.text_of(doc_id) or "")
        for j, tok in enumerate(toks):
            low = tok.lower()
            if low not in heads or j == 0:
                continue
            before: list[str] = []
            start = j
            for k in range(j - 1, max(-1, j - 4), -1):
                prev = toks[k]
                if not (prev[0].isalnum() or prev[0] == "_") or prev.lower() in _NOT_MODIFIER:
                    break
                before.insert(0, prev)
                start = k
            # a capitalised word that opens a sentence says nothing of a name ("Currently Rhine...")
            while before and before[0][:1].isupper() and (start == 0 or toks[start - 1] in (".", "!", "?")):
                before.pop(0)
                start += 1
            if before:
                out.setdefault(low, set()).add((*before, tok))
    return out


class Avoid:
    """What a planted value must not be for one question: an acceptable answer, inside one or holding one, already
    in the gold document, or a substring of the question (case-insensitive); normalised once per question."""

    def __init__(self, question: RagQuestion, document: str) -> None:
        self.question = question.question.lower()
        self.norm_question = normalize_answer(question.question)
        self.answers = [f" {a} " for a in (normalize_answer(x) for x in question.answer_strings) if a]
        self.document = f" {normalize_answer(document)} "

    def allows(self, value: str) -> bool:
        norm = normalize_answer(value)
        if not norm or value.strip().lower() in self.question or norm in self.norm_question:
            return False
        padded = f" {norm} "
        if any(a in padded or padded in a for a in self.answers):
            return False
        return padded not in self.document


def acceptable(value: str, question: RagQuestion, document: str) -> bool:
    """Whether ``value`` may be planted for ``question`` whose gold text is ``document`` (see :class:`Avoid`)."""
    return Avoid(question, document).allows(value)


_NUMERAL = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?(st|nd|rd|th|s)?(?!\w)")
_WORDS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve")


def _ordinal(n: int) -> str:
    return "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")


def shifted(original: str, kind: str, detail: str, rng: np.random.Generator) -> str | None:
    """The original date or number with its numerals moved, when the set has no other value of its type: years
    by 3 to 40 (decades by 10 to 40, centuries by 1 to 3), other numbers by one seeded factor (x2, x3, /2, x1.5),
    number words to another number word (``kind`` and ``detail`` as :func:`~evret_core.rag.perturb.answer_types.shape`
    gives them); the unit, the format and the words around stay ("1,230 km (760 mi)" ->
    "2,460 km (1,520 mi)"; "1050s" -> "1080s"; "6th century BC" -> "8th century BC"). Coordinates (a value with
    a degree sign) move their degrees by 1 to 5, minutes and seconds kept, so they stay valid and each form of the
    same point moves alike ("47\u00b039\u2032N 9\u00b019\u2032E / 47.650; 9.317" -> "50\u00b039\u2032N
    12\u00b019\u2032E / 50.650; 12.317"). None when nothing moves."""
    is_date = kind == "date"
    degrees = "\u00b0" in original
    if degrees:
        step = int(rng.integers(1, 6)) * (1 if rng.random() < 0.5 else -1)
    if is_date and "century" in detail:
        step = int(rng.integers(1, 4)) * (1 if rng.random() < 0.5 else -1)
    elif is_date and "decade" in detail:
        step = int(rng.integers(1, 5)) * 10 * (1 if rng.random() < 0.5 else -1)
    elif not degrees:
        step = int(rng.integers(3, 41)) * (1 if rng.random() < 0.5 else -1)
    factor = float(rng.choice([2.0, 3.0, 0.5, 1.5]))

    def move(m: re.Match[str]) -> str:
        whole, decimals, suffix = m.group(1), m.group(2), m.group(3) or ""
        n = int(whole.replace(",", ""))
        if degrees:  # minutes and seconds (before a prime) stay; degrees move, never past the poles
            if original[m.end():m.end() + 1] in ("\u2032", "\u2033", "'", '"'):
                return m.group(0)
            new = n + step if 0 <= n + step <= 90 else n - step
            return f"{new}{'.' + decimals if decimals else ''}{suffix}"
        if is_date and (suffix in ("st", "nd", "rd", "th") or "century" in detail):
            new = max(1, n + (step if n + step >= 1 else -step))
            return f"{new}{_ordinal(new) if suffix in ('st', 'nd', 'rd', 'th') else suffix}"
        if is_date:
            return f"{max(1, n + step)}{suffix}"
        value = float(f"{n}.{decimals}") * factor if decimals else n * factor
        if decimals:
            text = f"{value:.{len(decimals)}f}"
        else:
            text = f"{max(1, round(value)):,}" if "," in whole else str(max(1, round(value)))
        if suffix in ("st", "nd", "rd", "th") and not decimals:  # "11th" doubled is "22nd", not "22th"
            suffix = _ordinal(max(1, round(value)))
        return f"{text}{suffix}"

    moved = _NUMERAL.sub(move, original)
    if moved == original:
        for i, word in enumerate(_WORDS):
            hit = re.search(rf"\b{word}\b", original, re.IGNORECASE)
            if hit:
                new = _WORDS[(i + 2 + int(rng.integers(0, 5))) % len(_WORDS)]
                new = new.capitalize() if hit.group()[0].isupper() else new
                moved = original[: hit.start()] + new + original[hit.end():]
                break
    return moved if moved != original else None


def _same_word(a: str, b: str) -> bool:
    """Two one-word values of one stem ("Catholicism", "Catholic"): the same thing, not a counterfactual."""
    return " " not in a.strip() and " " not in b.strip() and a[:5].lower() == b[:5].lower()


def _is_list(value: str) -> bool:
    """Whether a value names several things ("William of Volpiano and John of Ravenna", "Swabia, Franconia") or a
    range ("1421 to 1904")."""
    place, _comma, within = value.rpartition(", ")
    if place and "," not in place and " and " not in value and shape(value) == shape(place):
        return False  # "Cologne, Germany": one place, named with its country
    return (bool(re.search(r"\band\b|,\s*\w", value)) and not re.search(r"\d,\d", value)
            or bool(re.search(r"\d\s*(?:to|\u2013)\s*\d", value)))


class Counterfactual:
    """Family ``counterfactual`` (see the module docs)."""

    name = "counterfactual"

    def __init__(self, questions: QuestionSet | None = None) -> None:
        self._for: QuestionSet | None = None
        if questions is not None:
            self._index(questions)

    def _index(self, questions: QuestionSet) -> None:
        """The answer pool, each answer's question head noun, and the corpus phrases ending in a head of an answer."""
        self._pool = value_pool(questions)
        self._for = questions
        asked = {q.question_id: q.question for q in questions.questions}
        self._questions = asked
        self._asks = {v: question_head(asked.get(qid, "")) for v, qid, _t, _s in self._pool}
        heads = {h[0] for q in questions.questions for a in q.answer_strings for h in [head_of(a)] if h}
        self._phrases = corpus_heads(questions, heads)

    def __call__(self, question: RagQuestion, contexts: Sequence[Context], questions: QuestionSet,
                 rng: np.random.Generator) -> ConditionCase:
        if question.fake_answer_is_an_answer:
            return ConditionCase(list(contexts), skip="counterfactual: the question's own fake answer is one of its "
                                                      "answers (adopting it could not be told from answering right)")
        if question.counterfactual_passages:
            return self._own_passages(question, contexts, rng)
        if question.expected_behaviour != "answer" or not question.answers:
            return ConditionCase(list(contexts), skip="counterfactual: the question has no answer to replace")
        source = next((d for d in question.gold_doc_ids if questions.text_of(d) is not None), None)
        if source is None:
            return ConditionCase(list(contexts), skip="counterfactual: no gold document in the corpus")
        text = questions.text_of(source) or ""
        span = find_span(text, question, source, questions)
        if span is None:
            return ConditionCase(list(contexts), skip="counterfactual: the answer is not in the gold document")
        original = text[span[0] : span[1]]
        wanted = value_type(original, question.question)
        if question.counterfactual_answers:
            choices = [(v, "question") for v in question.counterfactual_answers if acceptable(v, question, text)]
            if not choices:
                return ConditionCase(list(contexts), skip="counterfactual: the question's own fake answer is an "
                                                          "acceptable answer or already in the document")
            rule = "question"
        else:
            rule, choices = self._choices(question, original, text, questions)
            if not choices and shape(original)[0] in ("date", "number"):
                moved = shifted(original, *shape(original), rng)
                rule, choices = "shifted", [(moved, "shifted")] if moved and acceptable(moved, question, text) else []
            if not choices:
                what = f"{wanted[0]}{f' ({wanted[1]})' if wanted[1] and wanted[1] != wanted[0] else ''}"
                why = "" if typed(wanted) else ", and its question asks for nothing in particular"
                return ConditionCase(list(contexts), skip=f"counterfactual: no other value of the answer's type "
                                                          f"({what}) to plant{why}")
        planted, origin = choices[int(rng.integers(len(choices)))]
        forged = Context(_doc_id(question.question_id, self.name), text[: span[0]] + planted + text[span[1] :])
        position = POSITIONS[int(rng.integers(len(POSITIONS)))]
        # the planted value is typed by the question it answers (a corpus phrase, a moved number or the question's
        # own fake answer by this question)
        answers = self._questions.get(origin) if self._for is questions else None
        consistent, why = check_planting(original, planted, question.question, answers)
        return ConditionCase(
            _insert(list(contexts), forged, position),
            info={"family": self.name, "planted_answer": planted, "original_answer": original, "kind": wanted[0],
                  "type_check": why, "type_consistent": consistent, "planted_from": origin, "rule": rule,
                  "source_doc": source,
                  "forged_doc": forged.doc_id, "span": [span[0], span[1]], "position": position},
        )

    def _choices(self, question: RagQuestion, original: str, text: str, questions: QuestionSet
                 ) -> tuple[str, list[tuple[str, str]]]:
        """The rule that found values (see the module) and its (value, where it came from: a question id or
        ``corpus``) pairs, all of the original's string-only shape."""
        if self._for is not questions:
            self._index(questions)
        refined, plain = value_type(original, question.question), shape(original)
        avoid = Avoid(question, text)
        same_shape = [(v, qid, t) for v, qid, t, s in self._pool
                      if s == plain and qid != question.question_id and avoid.allows(v) and not _same_word(original, v)]
        listed = _is_list(original)  # two people for one ("Edgar" -> "William ... and John ...") is spotted at once
        same_shape = [e for e in same_shape if _is_list(e[0]) == listed] or same_shape
        if plain[0] not in ("date", "number"):
            same_head = self._same_head(original, plain, avoid, same_shape)
            if same_head:
                return "same-head", same_head
            asks = question_head(question.question)
            by_question = [(v, qid) for v, qid, _t in same_shape if asks and self._asks.get(v) == asks]
            if by_question:
                return "question-head", by_question
        # a value whose type says nothing in particular (a phrase answering "what increased...?") gets no
        # "same-type" value: any phrase would do, and a reader spots it ("loess" -> "pollution")
        return "same-type", [(v, qid) for v, qid, t in same_shape if t == refined] if typed(refined) else []

    def _same_head(self, original: str, plain: tuple[str, str], avoid: Avoid,
                   same_shape: list[tuple[str, str, tuple[str, str]]]) -> list[tuple[str, str]]:
        """Phrases with the original's head noun and as many words before it, capitalised alike: other answers
        first, then the corpus's."""
        found = head_of(original)
        if found is None:
            return []
        head, before, tail = found
        caps = [w[:1].isupper() for w in before]
        out: dict[str, str] = {}
        for v, qid, _t in same_shape:
            other = head_of(v)
            if other and other[0] == head and [w[:1].isupper() for w in other[1]] == caps:
                out.setdefault(v, qid)
        named = original.split()[len(before)][:1].isupper()  # "Lake" in a name is not "lake" in a phrase
        for phrase in sorted(self._phrases.get(head, ())):
            words = phrase[:-1][-len(before):]
            if len(words) < len(before) or [w[:1].isupper() for w in words] != caps:
                continue
            if phrase[-1][:1].isupper() != named:
                continue
            if phrase[-1][:1].isupper() and any(w.lower() in _LANGUAGES for w in words):
                continue
            value = " ".join((*words, phrase[-1])) + tail
            if (value.lower() != original.lower() and value not in out and shape(value) == plain
                    and avoid.allows(value)):
                out[value] = "corpus"
        return list(out.items())

    def _own_passages(self, question: RagQuestion, contexts: Sequence[Context], rng: np.random.Generator
                      ) -> ConditionCase:
        docs = list(contexts)
        forged = []
        position = POSITIONS[int(rng.integers(len(POSITIONS)))]
        for n, passage in enumerate(question.counterfactual_passages):
            doc = Context(_doc_id(question.question_id, self.name, n), passage)
            docs = _insert(docs, doc, position)
            forged.append(doc.doc_id)
        planted = question.counterfactual_answers[0] if question.counterfactual_answers else ""
        info: dict[str, object] = {
            "family": self.name, "planted_answer": planted, "planted_answers": list(question.counterfactual_answers),
            "planted_from": "question", "forged_docs": forged, "forged_doc": forged[0], "position": position}
        if planted and question.answers:  # how the set's own fake compares with its answer, by the same checker
            info["type_consistent"], info["type_check"] = check_planting(question.canonical_answers[0], planted,
                                                                         question.question)
        return ConditionCase(docs, info=info)
