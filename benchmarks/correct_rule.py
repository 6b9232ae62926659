"""The default ``correct`` rule of the RAG harness against the SQuAD 2.0 subset's gold answers, before and after.

Answers that should count as right and answers that should not are built from the subset itself (seeded):

- right: each annotator's answer judged against the *other* annotators' answers of its question (leave one out,
  as SQuAD's human baseline is computed; only questions whose annotators gave two or more distinct texts), as it
  is, inside a short sentence ("It is 10th century.") and after the question's words ("was the Battle of
  Hastings: 1066");
- wrong: another question's answer from the same paragraph (not equal to, inside or holding one of this
  question's answers), and the first gold answer with its numbers changed (questions whose answer has one), each
  as it is and inside a short sentence; judged against all the question's gold answers.

- wrong, hedges: the first gold answer "or" another question's answer of the paragraph, and listed (commas) with
  three of them.

Rules: *before*, exact match or token F1 > 0.5 (the harness until issue 33); *after*,
:func:`evret_core.rag.scores.answers.answer_is_correct` (a number or month that disagrees is never right, nor an
answer offering an alternative with "or"; a short answer stating a gold answer whole is). Prints both error
directions for each, per kind of answer, and the after rule's errors for other bounds of a "short" answer, with and
without leaving the question's words out of the count, as Markdown for docs/benchmarks.md.

Usage: python benchmarks/correct_rule.py [--shared ../shared] [--seed 0]
"""

from __future__ import annotations

import argparse
import random
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from evret_core.rag import QuestionSet
from evret_core.rag.scores.answers import (
    SHORT_ANSWER_EXTRA_WORDS,
    answer_is_correct,
    normalize_answer,
    quantities,
    squad_scores,
)

REPO = Path(__file__).resolve().parents[1]
SQUAD = Path("datasets") / "squad2" / "dev-v2.0-subset.json"
SENTENCES = ("It is {}.", "The answer is {}.", "{}, according to the passage.", "That would be {}.",
             "I believe it was {}.")
_WORDS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve")

Case = tuple[str, str, list[str], str]  # (kind, answer, gold answers, question)


def before(prediction: str, golds: Sequence[str], question: str = "") -> bool:
    """The rule until issue 33: exact match or token F1 above 0.5 (maxima over the gold answers)."""
    exact, f1 = squad_scores(prediction, golds)
    return bool(exact) or f1 > 0.5


def changed_number(text: str, rng: random.Random) -> str | None:
    """``text`` with each numeral moved (by 1 to 9, or doubled) and each number word made another; None when it
    states no number."""
    def numeral(m: re.Match[str]) -> str:
        n = int(m.group().replace(",", ""))
        new = n * 2 if rng.random() < 0.3 and n > 1 else n + rng.randint(1, 9)
        return f"{new:,}" if "," in m.group() else str(new)

    out = re.sub(r"\d{1,3}(?:,\d{3})+|\d+", numeral, text)
    for i, word in enumerate(_WORDS):
        out = re.sub(rf"\b{word}\b", _WORDS[(i + rng.randint(1, 10)) % len(_WORDS)], out, flags=re.IGNORECASE)
    return out if quantities(out) != quantities(text) else None


def restated(question: str) -> str:
    """The question as the start of an answer, its first word and question mark dropped ("When was the Battle of
    Hastings?" -> "was the Battle of Hastings"), as a verbose answer repeats the question's words."""
    words = question.strip().rstrip("?").split()
    return " ".join(words[1:]) if len(words) > 1 else question


def related(a: str, b: str) -> bool:
    """Whether one normalised answer equals, holds or sits inside the other (as whole tokens)."""
    x, y = f" {normalize_answer(a)} ", f" {normalize_answer(b)} "
    return x.strip() == y.strip() or x in y or y in x


def cases(questions: QuestionSet, seed: int = 0) -> tuple[list[Case], list[Case]]:
    """(answers that should count as right, answers that should not), each with its gold answers."""
    rng = random.Random(seed)
    answerable = [q for q in questions.questions if q.answers]
    by_doc: dict[str, list[str]] = {}
    for q in answerable:
        by_doc.setdefault(q.gold_doc_ids[0], []).append(q.answer_strings[0])
    right: list[Case] = []
    wrong: list[Case] = []
    for q in answerable:
        golds = q.answer_strings
        sentence = SENTENCES[rng.randrange(len(SENTENCES))]
        if len(golds) > 1:
            for i, text in enumerate(golds):
                others = [g for j, g in enumerate(golds) if j != i]
                right += [("another annotator's answer", text, others, q.question),
                          ("another annotator's answer in a sentence", sentence.format(text), others, q.question),
                          ("another annotator's answer after the question restated", f"{restated(q.question)}: {text}",
                           others, q.question)]
        pool = [a for a in by_doc[q.gold_doc_ids[0]] if not any(related(a, g) for g in golds)]
        if pool:
            other = rng.choice(sorted(set(pool)))
            wrong += [("another question's answer", other, golds, q.question),
                      ("another question's answer in a sentence", sentence.format(other), golds, q.question)]
        if len(pool) >= 3:  # hedges: the gold answer among others of the paragraph
            others = rng.sample(sorted(set(pool)), 3) if len(set(pool)) >= 3 else sorted(set(pool))
            wrong += [("the gold answer or another question's answer", f"{golds[0]} or {others[0]}", golds,
                       q.question),
                      ("the gold answer listed with three other answers", ", ".join(
                          rng.sample([golds[0], *others], len(others) + 1)), golds, q.question)]
        moved = changed_number(golds[0], rng)
        if moved is not None:
            wrong += [("the gold answer with a changed number", moved, golds, q.question),
                      ("the gold answer with a changed number, in a sentence", sentence.format(moved), golds,
                       q.question)]
    return right, wrong


Rule = Callable[[str, Sequence[str], str], bool]


def errors(rule: Rule, right: list[Case], wrong: list[Case]) -> tuple[int, int]:
    """(right answers judged wrong, wrong answers judged right)."""
    return (sum(not rule(a, g, q) for _k, a, g, q in right), sum(rule(a, g, q) for _k, a, g, q in wrong))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    questions = QuestionSet.load(args.shared / SQUAD)
    right, wrong = cases(questions, args.seed)
    rules: dict[str, Rule] = {
        "before (exact or F1 > 0.5)": before,
        f"after (numbers, no \"or\", short: at most {SHORT_ANSWER_EXTRA_WORDS} other content words)":
            lambda a, g, q: answer_is_correct(a, g, question=q)}
    print(f"{len(right)} answers that should count as right, {len(wrong)} that should not (seed {args.seed})\n")
    print("| rule | right answers judged wrong | wrong answers judged right |\n|---|---|---|")
    for name, rule in rules.items():
        missed, accepted = errors(rule, right, wrong)
        print(f"| {name} | {missed} of {len(right)} ({missed / len(right):.1%}) | {accepted} of {len(wrong)} "
              f"({accepted / len(wrong):.1%}) |")
    print("\n| kind of answer | should be | n | before: judged so | after: judged so |\n|---|---|---|---|---|")
    for expected, group in (("right", right), ("wrong", wrong)):
        for kind in dict.fromkeys(k for k, _a, _g, _q in group):
            members = [(a, g, q) for k, a, g, q in group if k == kind]
            counts = [sum(rule(a, g, q) == (expected == "right") for a, g, q in members) for rule in rules.values()]
            print(f"| {kind} | {expected} | {len(members)} | {counts[0]} | {counts[1]} |")
    print("\n| short: other content words at most | question's words | right answers judged wrong | wrong answers "
          "judged right |\n|---|---|---|---|")
    for short in (-1, 0, 1, 2, 3, 4, 5, 8):
        for leave_out in (True, False):
            missed, accepted = errors(lambda a, g, q, s=short, o=leave_out: answer_is_correct(
                a, g, question=q if o else "", short=s), right, wrong)
            print(f"| {'(no short-answer rule)' if short < 0 else short} | {'not counted' if leave_out else 'counted'}"
                  f" | {missed} | {accepted} |")


if __name__ == "__main__":
    main()
