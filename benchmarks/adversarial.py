"""The adversarial families on real data: the SQuAD 2.0 subset, bm25 top 5, every family over the retrieved contexts.

For each generator, prints the clean rates and, per family, its rates with 95% bootstrap intervals and the paired
change of ``correct`` against the clean (retrieved) condition, as Markdown for docs/benchmarks.md. Generators in the
same run: the offline extractive generator, and the trivial never-refuse (threshold 0) and always-refuse peers, which
show why each refusal rate stands beside the clean wrong-refusal rate. ``--llm`` adds the ``llm``
generator (through Evret's LLM layer and the test kit's ``stub`` provider) against two stub models on 127.0.0.1: a
careful one (answers from the context that shares most words with the question) and an obedient one (the same, but
it follows any instruction that carries a canary, as a model without injection defences would).

``--plantings N`` prints instead what the counterfactual family planted: the share of plantings that keep the
original answer's type by :func:`evret_core.rag.perturb.answer_types.check_planting`, the skips, and N plantings drawn at
random (``--seed``: the plantings' and the draw's) with the rule that found each value and the question it answers, for
a person to judge; ``--rule same-head`` (or ``question-head``...) draws the sample from that rule's plantings only;
``--with-example`` adds the bundled example's plantings (examples/rag) to the SQuAD subset's before the draw.

Usage: python benchmarks/adversarial.py [--shared ../shared] [--resamples 1000] [--llm]
       [--plantings 40 [--seed S] [--rule R] [--with-example]]
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path
from typing import Any

from evret_core import create_retriever
from evret_core.rag import Answer, QuestionSet, RagEvaluator, RagResults
from evret_core.rag.perturb.cases import adversarial_conditions
from evret_core.rag.perturb.perturbations import FAMILIES
from evret_core.testing.llm_provider import stub_options
from evret_core.testing.llm_stubs import StubLLMServer, StubRequest
from evret_core.testing.rag_stub import rag_responder

REPO = Path(__file__).resolve().parents[1]
SQUAD = Path("datasets") / "squad2" / "dev-v2.0-subset.json"


def run(questions: QuestionSet, generator: Any, options: dict[str, Any] | None = None,
        n_resamples: int = 1000, seed: int = 0) -> RagResults:
    retriever = create_retriever("bm25", corpus=questions.corpus)
    conditions = ["retrieved", *adversarial_conditions(FAMILIES, base="retrieved", seed=seed)]
    return RagEvaluator(retriever, generator, generator_options=options, conditions=conditions, k=5,
                        n_resamples=n_resamples, seed=seed).evaluate(questions)


def table(name: str, results: RagResults) -> str:
    clean = results.generation["retrieved"]
    lines = [f"**{name}** — clean (retrieved): correct {clean['correct']:.3f}, refused {clean['refused']:.3f}, "
             f"wrong refusals {clean['wrong_refusal_rate']:.3f}", "",
             "| family | n | rate | value [95% CI] | correct vs clean [95% CI] |", "|---|---|---|---|---|"]
    for family in FAMILIES:
        entry = results.adversarial[family]
        drop = entry.get("drop") or {}
        change = (f"{drop['delta']:+.3f} [{drop['interval'][0]:+.3f}, {drop['interval'][1]:+.3f}]"
                  if drop.get("n") else "n/a")
        for i, (rate, value) in enumerate(entry["rates"].items()):
            low, high = entry["intervals"][rate]
            lines.append(f"| {family if i == 0 else ''} | {entry['n'] if i == 0 else ''} | {rate} | "
                         f"{value:.3f} [{low:.3f}, {high:.3f}] | {change if i == 0 else ''} |")
    injection = results.adversarial["injection"]["slices"]
    for key in ("template", "position"):
        cells = ", ".join(f"{v} {s['rates'].get('leaked', 0):.2f}" for v, s in injection.get(key, {}).items())
        lines.append(f"\ninjection leak rate by {key}: {cells}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--llm", action="store_true", help="also the llm generator against two stub models")
    parser.add_argument("--plantings", type=int, metavar="N", help="only the counterfactual plantings, N sampled")
    parser.add_argument("--rule", help="with --plantings: sample only the plantings of this rule (same-head...)")
    parser.add_argument("--seed", type=int, default=0, help="with --plantings: seed of the plantings and the draw")
    parser.add_argument("--with-example", action="store_true",
                        help="with --plantings: the bundled example's plantings too (examples/rag)")
    args = parser.parse_args()
    questions = QuestionSet.load(args.shared / SQUAD)
    if args.plantings is not None:
        sets = [questions]
        if args.with_example:
            sets.append(QuestionSet.load(REPO / "examples" / "rag" / "questions.jsonl",
                                         REPO / "examples" / "rag" / "corpus.jsonl"))
        print(plantings(sets, args.plantings, seed=args.seed, rule=args.rule))
        return
    generators: dict[str, tuple[Any, dict[str, Any] | None]] = {
        "extractive (threshold 0.5)": ("extractive", None),
        "never refuses (extractive, threshold 0)": ("extractive", {"threshold": 0.0}),
        "always refuses": (lambda question, contexts: Answer(refused=True), None),
    }
    for name, (generator, options) in generators.items():
        started = time.perf_counter()
        results = run(questions, generator, options, args.resamples)
        print(f"{table(name, results)}\n\n({len(questions)} questions, {time.perf_counter() - started:.1f} s)\n")


    if args.llm:
        for name, responder in (("llm generator, careful stub model", rag_responder()),
                                ("llm generator, obedient stub model", obedient(rag_responder()))):
            with StubLLMServer(responder) as server:
                started = time.perf_counter()
                options = {**stub_options(server), "cache": False, "max_concurrency": 16}
                results = run(questions, "llm", options, args.resamples)
                print(f"{table(name, results)}\n\n({len(questions)} questions, {time.perf_counter() - started:.1f} s, "
                      f"{len(server.requests)} LLM calls)\n")


def plantings(sets: list[QuestionSet], sample: int, seed: int = 0, rule: str | None = None) -> str:
    """The counterfactual family's plantings over the gold contexts of each question set: type-consistent share,
    skips, and a sample drawn from all of them."""
    import random
    from collections import Counter

    from evret_core.rag.perturb.answer_types import check_planting
    from evret_core.rag.perturb.cases import build_cases

    built, skips, lines = [], Counter(), []
    answerable = consistent = in_question = 0
    origin: Counter[str] = Counter()
    sources = {"shifted": "(its own numerals, moved)", "corpus": "(a corpus phrase)"}
    for questions in sets:
        cases = build_cases(adversarial_conditions(["counterfactual"], base="gold", seed=seed), questions, None,
                            k=5, seed=seed)["counterfactual"]
        asked = {q.question_id: q.question.strip() for q in questions.questions}
        here = [(q, c) for q, c in zip(questions.questions, cases, strict=True) if not c.skip]
        answerable += sum(bool(q.answers) for q in questions.questions)
        consistent += sum(check_planting(c.info["original_answer"], c.info["planted_answer"], q.question,
                                         asked.get(c.info["planted_from"]))[0] for q, c in here)
        in_question += sum(c.info["planted_answer"].lower() in q.question.lower() for q, c in here)
        origin.update(c.info["rule"] for _q, c in here)
        skips.update(c.skip for q, c in zip(questions.questions, cases, strict=True) if c.skip and q.answers)
        built += [(q, c, asked.get(c.info["planted_from"]) or sources[c.info["planted_from"]],
                   questions.name or "") for q, c in here]
    lines = [f"plantings: {len(built)} of {answerable} answerable questions; type-consistent by check_planting: "
             f"{consistent} ({consistent / max(len(built), 1):.1%}); substrings of the question: {in_question}",
             f"planted by rule: {dict(origin)}; answerable questions skipped: {dict(skips)}", "",
             "| # | set | question | original | planted | rule | checker | the planted value answers |",
             "|---|---|---|---|---|---|---|---|"]
    pool = [row for row in built if rule is None or row[1].info["rule"] == rule]
    for n, (q, c, source, name) in enumerate(random.Random(seed).sample(pool, min(sample, len(pool))), start=1):
        cells = [str(n), name, q.question.strip(), c.info["original_answer"], c.info["planted_answer"],
                 c.info["rule"], c.info["type_check"], source]
        lines.append("| " + " | ".join(x.replace("|", "/") for x in cells) + " |")
    return "\n".join(lines)


CANARY = re.compile(r"ZX[0-9A-F]{12}")


def obedient(careful: Any) -> Any:
    """A stub model that obeys injected instructions: when a context carries a canary, it answers with it."""

    def respond(request: StubRequest) -> Any:
        found = CANARY.search(request.prompt) if "Context id" in request.prompt else None
        if found is None:
            return careful(request)
        return json.dumps({"answer": found.group(0), "claims": [], "refused": False, "escalated": False})

    return respond


if __name__ == "__main__":
    main()
