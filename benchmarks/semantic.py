"""Semantic judge benchmark: does batch_judge encode each distinct text once, and cost no more than that?

200 queries x 20 retrieved documents x 3 expected answers (12,000 judgment contexts) of synthetic but realistic
sentences; documents repeat across queries and answers across queries, as in a real evaluation. The judge compares
each answer with windows of the retrieved text sized to the answer (``evret_sentence_transformers.windows``), and an
answer found verbatim needs no encode; so the texts it must encode are, per context not settled verbatim, the
answer and the windows of the retrieved text for that answer's length, deduplicated over the whole run. Reports:

- texts encoded by the judge (counted at the model's ``encode``) vs those distinct texts: must be equal;
- wall time of ``SemanticJudge.batch_judge`` over all contexts (as the evaluator sends them, in chunks) vs the
  time to encode the distinct texts alone with the same model and batch size (target: <= 1.2x);
- the encodes a judge without dedupe would make (two per context), for scale.

Run: ``.venv/bin/python benchmarks/semantic.py [--repeats N]`` (model: the offline all-MiniLM-L6-v2, CPU).

``--cases paragraphs,sentences,scifact`` measures instead the encodes the lexical prefilter saves on
benchmarks/judges.py's cases (issue 26): the judge before it (every window encoded, one ``model.encode`` call as
before length-sorted chunks) against the judge now (defaults), driven as the evaluator drives it (``prepare``, then
``batch_judge`` in chunks of 1024). Prints, per case, the texts each encodes, the ratio, the verdict flips (target:
<= 1/5 of the encodes, 0 flips), the times, and the highest cosine among the windows the prefilter skipped.
SciFact is bounded by ``--scifact-queries`` (its whole run is ~30 min of encoding on 2 CPU cores). With
``--device cuda --fp16`` the judge now runs in half precision, so the flips measure fp16's verdict agreement too.
Per case it also prints the texts each prefilter rule saved (trigrams / word stems) and, per rule, the highest
cosine among the windows it skipped.

``--stem-margins`` measures the stem rule on near-copies: SciFact texts against edited copies of themselves.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

CITIES = ["Lisbon", "Oslo", "Nairobi", "Lima", "Hanoi", "Montreal", "Krakow", "Adelaide", "Cairo", "Seville",
          "Osaka", "Bergen", "Quito", "Tbilisi", "Dakar", "Porto", "Tallinn", "Cusco", "Zanzibar", "Valparaiso"]
FACTS = [
    ("population", "has about {n} hundred thousand inhabitants", "is home to roughly {people} people"),
    ("founded", "was founded in the year {y}", "dates back to its founding in {y}"),
    ("river", "lies on the banks of a river that floods every spring", "is built beside a river prone to spring floods"),
    ("climate", "has mild winters and dry, hot summers", "enjoys warm dry summers and gentle winters"),
    ("port", "runs one of the busiest container ports in the region", "operates a major regional container port"),
    ("university", "hosts a university established in {y}", "has had a university since {y}"),
    ("tram", "still operates a historic tram network", "keeps its old trams running through the centre"),
    ("festival", "holds a music festival every July", "celebrates a large summer music festival in July"),
    ("altitude", "sits at an altitude of {n}00 metres", "is located {n}00 metres above sea level"),
    ("market", "is known for its covered fish market", "is famous for an indoor market selling fresh fish"),
]
NOISE = [
    "Quarterly revenue rose on stronger demand for cloud services.",
    "The committee postponed its vote until the next session.",
    "Regular exercise improves sleep quality in older adults.",
    "The recipe calls for two cups of flour and a pinch of salt.",
    "Engineers replaced the bridge bearings during the night closure.",
    "The museum extended its opening hours for the exhibition.",
    "Heavy rain is expected across the northern valleys tomorrow.",
    "The library added a new collection of rare maps.",
]


def build(queries: int = 200, retrieved: int = 20, expected: int = 3, seed: int = 7) -> list[Any]:
    """The judgment contexts of a synthetic evaluation, in the evaluator's first-seen, deduplicated order."""
    from evret_core.contracts.judge import JudgmentContext

    rng = random.Random(seed)
    values = {(c, f): (rng.randint(2, 40), rng.randint(1100, 1990)) for c in CITIES for f, _, _ in FACTS}

    def doc(city: str, fact: int, variant: int) -> str:
        key, doc_form, answer_form = FACTS[fact]
        n, y = values[(city, key)]
        form = answer_form if variant == 1 else doc_form  # answers paraphrase the documents
        prefix = "According to the city archive, " if variant == 2 else ""
        return f"{prefix}{city} {form.format(n=n, y=y, people=f'{n * 100_000:,}')}."

    documents = [doc(c, f, v) for c in CITIES for f in range(len(FACTS)) for v in (0, 2)] + NOISE
    seen: dict[JudgmentContext, None] = {}
    for q in range(queries):
        city = CITIES[q % len(CITIES)]
        facts = rng.sample(range(len(FACTS)), expected)
        answers = [doc(city, f, 1) for f in facts]  # expected answers are paraphrases of the documents
        relevant = [doc(city, f, rng.choice((0, 2))) for f in facts[:2]]
        others = rng.sample(documents, retrieved)
        ranked = list(dict.fromkeys(relevant + others))[:retrieved]
        text = f"What do you know about {city}? ({q})"
        for r in ranked:
            for a in answers:
                seen.setdefault(JudgmentContext(query=text, expected_text=a, retrieved_text=r), None)
    return list(seen)


def case_contexts(name: str, scifact_queries: int) -> list[Any]:
    """The distinct judgment contexts of one of benchmarks/judges.py's cases, as the evaluator plans them."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import judges as cases

    from evret_core import EvaluationDataset, Evaluator, QueryExample, create_retriever

    if name in ("paragraphs", "sentences"):
        case = cases.squad_case(name)
        dataset, run, k = case.dataset, case.run, 10
    else:  # SciFact's text labels (gold abstract texts), BM25 top 100, the first ``scifact_queries`` queries
        full = EvaluationDataset.from_beir(cases.SHARED / "scifact")
        corpus = full.corpus or {}
        queries = full.queries[:scifact_queries]
        ids = EvaluationDataset(name="scifact-sample", queries=queries, corpus=corpus)
        dataset = EvaluationDataset(name="scifact-text", queries=[
            QueryExample(query_id=q.query_id, query_text=q.query_text,
                         expected_answers=[corpus[d]["text"] for d, g in q.relevance.items() if g > 0])
            for q in queries])
        retrieved = Evaluator(create_retriever("bm25", dataset=full), metrics=["recall@100"], k=100).retrieve(ids)
        run, k = {q.query_id: r for q, r in zip(queries, retrieved, strict=True)}, 100
    evaluator = Evaluator(run, metrics=[f"recall@{k}"], k=k)
    return evaluator.plan_judgments(dataset, evaluator.retrieve_rows(dataset))


def judge_all(judge: Any, contexts: list[Any], chunk: int = 1024) -> tuple[list[bool | None], float]:
    started = time.perf_counter()
    judge.prepare(contexts)
    verdicts: list[bool | None] = []
    for start in range(0, len(contexts), chunk):
        verdicts.extend(judge.batch_judge(contexts[start : start + chunk]))
    return verdicts, time.perf_counter() - started


def encodes_saved(names: list[str], scifact_queries: int, device: str, fp16: bool = False) -> int:
    """Before/after the prefilter on real cases (module docs)."""
    import os

    import numpy as np
    from evret_sentence_transformers import Encoder, SemanticJudge
    from evret_sentence_transformers.models import paired_cosines

    class OneCallEncoder(Encoder):
        """The encoder before issue 26: every missing text in one ``model.encode`` call."""

        def _encode_now(self, texts: list[str], progress: Any = None) -> np.ndarray:
            self.encode_calls += 1
            self.texts_encoded += len(texts)
            vectors = self.model.encode(texts, batch_size=self.batch_size, convert_to_numpy=True,
                                        normalize_embeddings=True, show_progress_bar=False)
            return np.ascontiguousarray(vectors, dtype=np.float32)

    print(f"load average at start: {os.getloadavg()[0]:.2f} (2 shared cores)", flush=True)
    failed = 0
    rows = []
    for name in names:
        contexts = case_contexts(name, scifact_queries)
        before = SemanticJudge(prefilter=False, device=device)
        before.encoder = OneCallEncoder(device=device, what="semantic judge: option 'model'")
        now = SemanticJudge(device=device, fp16=fp16)  # fp16 (CUDA only): the flips then include fp16's
        old, old_s = judge_all(before, contexts)
        new, new_s = judge_all(now, contexts)
        flips = sum(a != b for a, b in zip(old, new, strict=True))
        # per rule, the highest cosine among the windows it skipped (every window is in ``before``'s table)
        tops = []
        for rule in ("trigrams", "stems"):
            left: list[str] = []
            right: list[str] = []
            for c in contexts:
                for variant, windows, by_trigrams, kept in now._pairs_of(c) or ():
                    keep = set(by_trigrams if rule == "trigrams" else kept)
                    skipped = [w for w in (windows if rule == "trigrams" else by_trigrams) if w not in keep]
                    left.extend([variant] * len(skipped))
                    right.extend(skipped)
            tops.append(float(paired_cosines(before.table.matrix, before.table.rows(left),
                                             before.table.rows(right)).max()) if left else float("nan"))
        a, b = before.stats()["texts_encoded"], now.stats()["texts_encoded"]
        stats = now.stats()
        saved = f"{stats['prefilter_skipped_trigrams']} / {stats['prefilter_skipped_stems']}"
        rows.append((name, len(contexts), a, b, b / a if a else 0.0, flips, old_s, new_s, saved, tops,
                     sum(bool(v) for v in new), stats))
        failed += flips > 0 or (a and b / a > 0.2)
        print(f"{name}: {len(contexts)} contexts, encodes {a} -> {b} ({b / a if a else 0:.3f}), flips {flips}, "
              f"{old_s:.1f} s -> {new_s:.1f} s, saved by trigrams / stems {saved}, max skipped cosine "
              f"{tops[0]:.3f} / {tops[1]:.3f}", flush=True)
    print()
    print("| case | contexts | encodes before | encodes now | now / before | verdict flips | time before (s) | "
          "time now (s) | matches | saved by trigrams / stems | highest cosine skipped, trigrams / stems |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, n, a, b, ratio, flips, old_s, new_s, saved, tops, hits, _ in rows:
        print(f"| {name} | {n} | {a} | {b} | {ratio:.3f} | {flips} | {old_s:.1f} | {new_s:.1f} | {hits} | {saved} | "
              f"{tops[0]:.3f} / {tops[1]:.3f} |")
    print(f"\njudge stats now (last case): {rows[-1][-1]}")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    return 1 if failed else 0


def perturb(text: str, kind: str, share: float, rng: random.Random, vocabulary: list[str]) -> str:
    """``text`` edited word by word: ``share`` of its words replaced by others, dropped, given an "s", misspelt
    (last letter -> "x"), or all shuffled."""
    words = text.split()
    hit = [rng.random() < share for _ in words]
    if kind == "replace":
        return " ".join(rng.choice(vocabulary) if h else w for w, h in zip(words, hit, strict=True))
    if kind == "drop":
        return " ".join(w for w, h in zip(words, hit, strict=True) if not h) or words[0]
    if kind == "suffix":
        return " ".join(w + "s" if h else w for w, h in zip(words, hit, strict=True))
    if kind == "typo":
        return " ".join(w[:-1] + "x" if h and len(w) > 3 else w for w, h in zip(words, hit, strict=True))
    rng.shuffle(words)
    return " ".join(words)


def stem_margins(scifact_queries: int, device: str, seed: int = 5) -> int:
    """The stem rule's margin on near-copies: SciFact's gold abstracts (the answers of the ``scifact`` case),
    single sentences of retrieved abstracts (8 to 30 words) and runs of three sentences (30 to 90 words), each
    against edited copies of itself (:func:`perturb`). Prints, per answer length, the lowest stem cover among the
    pairs at cosine >= 0.93 (must stay above MIN_STEM_COVER) and the highest cosine among the pairs under it."""
    import numpy as np
    from evret_sentence_transformers import SemanticJudge
    from evret_sentence_transformers.models import paired_cosines
    from evret_sentence_transformers.prefilter import MIN_STEM_COVER, stems
    from evret_sentence_transformers.windows import sentences

    rng = random.Random(seed)
    contexts = case_contexts("scifact", scifact_queries)
    texts = list(dict.fromkeys(c.retrieved_text for c in contexts))[:400]
    vocabulary = " ".join(texts[:100]).split()
    short = [s for t in texts for s in sentences(t) if 8 <= len(s.split()) <= 30]
    runs = [r for t in texts[:200] for i in range(0, len(sentences(t)), 3)
            if 30 <= len((r := " ".join(sentences(t)[i : i + 3])).split()) <= 90]
    rng.shuffle(short)
    rng.shuffle(runs)
    answers = short[:150] + runs[:120] + list(dict.fromkeys(c.expected_text for c in contexts))
    pairs = [(a, perturb(a, kind, share, rng, vocabulary)) for a in answers
             for kind in ("replace", "drop", "suffix", "typo") for share in (0.1, 0.2, 0.3, 0.5)]
    pairs += [(a, perturb(a, "shuffle", 1.0, rng, vocabulary)) for a in answers]
    judge = SemanticJudge(prefilter=False, device=device)
    judge.table.ensure([t for pair in pairs for t in pair], judge.encoder)
    cosines = paired_cosines(judge.table.matrix, judge.table.rows([a for a, _ in pairs]),
                             judge.table.rows([b for _, b in pairs]))
    covers = np.array([len(stems(a) & stems(b)) / len(stems(a)) for a, b in pairs])
    lengths = np.array([len(a.split()) for a, _ in pairs])
    print(f"{len(pairs)} edited pairs of {len(answers)} answers; stem rule: MIN_STEM_COVER {MIN_STEM_COVER}")
    print("| answer words | pairs | at cosine >= 0.93 | lowest stem cover there | under the rule's share | "
          "highest cosine there |")
    print("|---|---|---|---|---|---|")
    failed = 0
    for low, high in ((8, 15), (16, 30), (31, 90), (91, 10_000)):
        band = (lengths >= low) & (lengths <= high)
        near, under = band & (cosines >= 0.93), band & (covers < MIN_STEM_COVER)
        lowest = float(covers[near].min()) if near.any() else float("nan")
        top = float(cosines[under].max()) if under.any() else float("nan")
        failed += bool(near.any() and lowest < MIN_STEM_COVER)
        print(f"| {low}-{high if high < 10_000 else ''} | {int(band.sum())} | {int(near.sum())} | {lowest:.3f} | "
              f"{int(under.sum())} | {top:.3f} |")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2, help="timed rounds; the best of each is reported")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--chunk", type=int, default=1024,
                        help="contexts per batch_judge call (the evaluator sends 1024 at a time)")
    parser.add_argument("--cases", default=None,
                        help="paragraphs,sentences,scifact: measure the encodes the prefilter saves instead")
    parser.add_argument("--scifact-queries", type=int, default=20, help="SciFact queries judged with --cases")
    parser.add_argument("--fp16", action="store_true",
                        help="with --cases and --device cuda: the judge now in fp16, against float32 before")
    parser.add_argument("--stem-margins", action="store_true",
                        help="measure the prefilter's stem rule on edited copies of SciFact texts instead")
    args = parser.parse_args(argv)
    if args.stem_margins:
        return stem_margins(args.scifact_queries, args.device)
    if args.cases:
        return encodes_saved([c.strip() for c in args.cases.split(",") if c.strip()], args.scifact_queries,
                             args.device, args.fp16)

    import numpy as np
    from evret_sentence_transformers import Encoder, SemanticJudge
    from evret_sentence_transformers.windows import text_windows

    from evret_core.text import contains_tokens, normalize

    contexts = build()
    needed: dict[str, None] = {}  # written from the judge's documented rule, not read from the judge
    verbatim = 0
    for c in contexts:
        if contains_tokens(normalize(c.retrieved_text), normalize(c.expected_text)):
            verbatim += 1
            continue
        needed[c.expected_text] = None
        needed.update(dict.fromkeys(text_windows(c.retrieved_text, len(c.expected_text.split()))))
    distinct = list(needed)
    n_expected = len({c.expected_text for c in contexts})
    print(f"contexts: {len(contexts)} ({verbatim} verbatim)  distinct texts to encode: {len(distinct)} "
          f"({n_expected} expected answers, the rest windows)", flush=True)

    model = Encoder(device=args.device).load().model  # load once: both sides time encoding, not loading
    model.encode(["warm up"], show_progress_bar=False)
    encoded: list[int] = []
    in_model: list[float] = []
    original = model.encode

    def counting(texts: Any, *a: Any, **kw: Any) -> Any:
        encoded.append(1 if isinstance(texts, str) else len(texts))
        started = time.perf_counter()
        try:
            return original(texts, *a, **kw)
        finally:
            in_model.append(time.perf_counter() - started)

    model.encode = counting
    judge_times: list[float] = []
    alone_times: list[float] = []
    overheads: list[float] = []  # batch_judge time spent outside the model: dedupe, lookups, cosines
    verdicts = None
    for round_ in range(args.repeats):
        # alternate the order so that neither side always runs on a warmer (or busier) machine
        for side in (("alone", "judge") if round_ % 2 == 0 else ("judge", "alone")):
            if side == "alone":
                started = time.perf_counter()
                original(distinct, batch_size=64, convert_to_numpy=True, normalize_embeddings=True,
                         show_progress_bar=False)
                alone_times.append(time.perf_counter() - started)
            else:
                encoded.clear()
                in_model.clear()
                judge = SemanticJudge(device=args.device, prefilter=False)  # the dedupe, every window
                started = time.perf_counter()
                answers: list[bool | None] = []
                judge.prepare(contexts)  # as the evaluator does: every distinct text in one pass
                for start in range(0, len(contexts), args.chunk):
                    answers.extend(judge.batch_judge(contexts[start : start + args.chunk]))
                judge_times.append(time.perf_counter() - started)
                overheads.append(judge_times[-1] - sum(in_model))
                verdicts = answers
                if sum(encoded) != len(distinct):
                    print(f"FAIL: the judge encoded {sum(encoded)} texts for {len(distinct)} distinct texts")
                    return 1
        print(f"round {round_ + 1}: batch_judge {judge_times[-1]:.2f}s, encode alone {alone_times[-1]:.2f}s",
              flush=True)
    assert verdicts is not None
    best_judge, best_alone = min(judge_times), min(alone_times)
    ratio = best_judge / best_alone
    print()
    print("| measure | value |")
    print("|---|---|")
    print(f"| judgment contexts (200 queries x 20 retrieved x 3 expected) | {len(contexts)} |")
    print(f"| contexts settled verbatim (no encode) | {verbatim} |")
    print(f"| distinct texts to encode (answers + windows) | {len(distinct)} |")
    print(f"| texts encoded by batch_judge | {sum(encoded)} |")
    per_context = sum(1 + len(text_windows(c.retrieved_text, len(c.expected_text.split()))) for c in contexts)
    print(f"| texts a per-context judge would encode | {per_context} |")
    print(f"| batch_judge wall time, {args.chunk} contexts per call (best of {args.repeats}) | {best_judge:.2f} s |")
    print(f"| encoding the distinct texts alone (best of {args.repeats}) | {best_alone:.2f} s |")
    print(f"| ratio batch_judge / encode alone (target <= 1.2) | {ratio:.3f} |")
    print(f"| batch_judge time outside the model (best of {args.repeats}) | {min(overheads) * 1000:.0f} ms |")
    print(f"| matches found | {int(np.sum(verdicts))} of {len(verdicts)} |")
    return 0 if ratio <= 1.2 else 1


if __name__ == "__main__":
    sys.exit(main())
