"""The cascade judge with a real LLM behind it: token-overlap -> ``llm`` (SQuAD), query-similarity -> ``relevance`` (DL19).

``squad`` (the default mode): the SQuAD 2.0 subset, token-overlap -> ``llm`` on SmolLM2-135M-Instruct.

``--questions`` answerable questions (seeded sample of the 386) over the subset's 83 paragraphs, BM25 top
``--top`` each: every (question, paragraph) pair is one judgment, true when the paragraph is the question's own
(gold); the expected answer is the first gold answer string (one LLM call per pair). The ``llm`` judge runs on the
packaged SmolLM2 (provider ``transformers``, one thread, answers cached in SQLite under ``--cache``: a stopped run
resumes; pairs are judged best rank first, so a partial run is a whole shallower top). The questions are split in
seeded halves: the band of ``token-overlap`` (no query boost) is fitted on the dev half (the fewest LLM calls whose
accuracy and kappa stay within 0.005 of the LLM alone there, ``benchmarks/calibration.py``'s rule) and the real
``CascadeJudge`` runs on the test half, counting its own LLM calls (replayed from the cache: the counts are the
cascade's calls, not new model calls). A fixed band chosen before looking, [0.1, 0.8), is reported beside.

``dl19``: TREC DL 2019's grade-stratified test-half sample of ``benchmarks/relevance_dl19.py`` (``--sample-size``
pairs per NIST grade), graded: ``query-similarity`` (MiniLM cosine, the thresholds fitted on the dev half, docs/
benchmarks.md) in front of ``relevance`` on SmolLM2 (fencing ``nonce``, one thread). The LLM's grades come from the
cache ``relevance_dl19.py`` filled (same judge, same keys): the mode checks that every pair is cached first and
sends no model call. Settled pairs take query-similarity's grade. The sample's 21 queries are split in seeded
halves; the band over the cosine is fitted on the dev half (the fewest LLM calls whose exact agreement and Cohen's
kappa with NIST stay within 0.005 of the LLM alone) and the real ``CascadeJudge`` runs on the test half, beside a
band fixed before looking at the LLM, [t1, t3) (query-similarity's grades 1-2 go to the LLM), also on all 21
queries. Agreement as ``evret agreement`` computes it (bootstrap over queries, 1,000 resamples); the differences
against the LLM alone are paired (the same resamples).

Usage: python benchmarks/cascade_llm.py [squad|dl19] [--shared ../shared] [--cache /tmp/evret-bench] [--questions 60]
           [--top 5] [--sample-size 150] [--cached-only]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from calibration import bm25_top, choose_band, squad, unit_any  # noqa: E402

from evret_core import EvaluationDataset, QueryExample, create_judge  # noqa: E402
from evret_core.calibration.agreement import agreement  # noqa: E402
from evret_core.calibration.labels import LabelledJudgment, derive_labels  # noqa: E402
from evret_core.judge.cascade import CascadeJudge, Stage  # noqa: E402
from evret_core.judge.thresholds import judge_scores  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
FIXED_BAND = (0.1, 0.8)


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def pairs(shared: Path, questions: int, top: int, seed: int) -> list[LabelledJudgment]:
    """The labelled (question, paragraph) pairs, best rank first (rank 1 of every question, then rank 2, ...)."""
    dataset, qrels = squad(shared)
    rng = np.random.default_rng(seed)
    picked = sorted(rng.choice(len(dataset.queries), size=questions, replace=False).tolist())
    chosen = [dataset.queries[i] for i in picked]
    one_answer = EvaluationDataset(name="squad2-sample", corpus=dataset.corpus, queries=[
        QueryExample(query_id=q.query_id, query_text=q.query_text, expected_answers=q.expected_answers[:1])
        for q in chosen])
    retrieved = bm25_top(one_answer, top)
    labels = derive_labels(one_answer, qrels, retrieved)
    rank = {(q, doc): r for q, docs in retrieved.items() for r, (doc, _) in enumerate(docs)}
    order = {q.query_id: i for i, q in enumerate(chosen)}
    return sorted(labels, key=lambda item: (rank[(item.query_id, item.doc_id)], order[item.query_id]))


def cells(name: str, got: Any, calls: str) -> str:
    low, high = got.kappa_interval
    return f"| {name} | {got.accuracy:.3f} | {got.kappa:.3f} [{low:.3f}, {high:.3f}] | {got.f1:.3f} | {calls} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get("EVRET_BENCH_CACHE", "/tmp/evret-bench")))
    parser.add_argument("--questions", type=int, default=60)
    parser.add_argument("--top", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--chunk", type=int, default=20, help="pairs per LLM batch (each answer is cached)")
    parser.add_argument("mode", nargs="?", choices=("squad", "dl19"), default="squad")
    parser.add_argument("--sample-size", type=int, default=150, help="dl19: pairs per NIST grade in the sample")
    parser.add_argument("--cached-only", action="store_true", help="dl19: only the sample's pairs the LLM's cache "
                        "answers (a stopped grading run's)")
    args = parser.parse_args()
    if args.mode == "dl19":
        dl19(args)
        return
    print(f"$ uptime\n{uptime()}", flush=True)
    args.cache.mkdir(parents=True, exist_ok=True)
    labels = pairs(args.shared, args.questions, args.top, args.seed)
    contexts = [item.contexts()[0] for item in labels]
    truth_all = np.array([item.label for item in labels], dtype=bool)
    print(f"{len(labels)} pairs over {len({i.query_id for i in labels})} questions, {truth_all.sum()} gold", flush=True)

    options = {"provider": "transformers", "model": "smollm2-135m", "cache": str(args.cache / "squad-llm.sqlite"),
               "provider_options": {"threads": 1, "max_new_tokens": 8}}
    llm = create_judge("llm", **options)
    verdicts: list[bool | None] = []
    started = time.perf_counter()
    for start in range(0, len(contexts), args.chunk):
        verdicts.extend(llm.batch_judge(contexts[start:start + args.chunk]))
        cost = llm.stats()["cost"]["transformers"]
        print(f"  {len(verdicts)}/{len(contexts)} judged, {cost['calls']} model calls, {cost['cache_hits']} cache "
              f"hits, {time.perf_counter() - started:.0f} s ({uptime()})", flush=True)
    stats = llm.stats()
    cost = stats["cost"]["transformers"]
    sent = cost["calls"]
    elapsed = time.perf_counter() - started
    print(f"llm (SmolLM2): {sent} model calls in {elapsed:.0f} s"
          + (f" ({elapsed / sent:.2f} s a call)" if sent else "") +
          f", {cost['cache_hits']} cache hits; unmeasured {stats['unmeasured']}; parsing {stats['parsing']}; "
          f"{sum(v is True for v in verdicts)} yes / {sum(v is False for v in verdicts)} no", flush=True)
    llm_verdict = dict(zip(contexts, verdicts, strict=True))

    overlap_judge = create_judge("token-overlap", query_boost=False)
    overlap = {c: (0.0 if s is None else s) for c, s in zip(contexts, judge_scores(overlap_judge, contexts),
                                                             strict=True)}
    qids = sorted({item.query_id for item in labels})
    rng = np.random.default_rng(args.seed)
    dev_ids = set(rng.choice(qids, size=len(qids) // 2, replace=False).tolist())
    dev = [item for item in labels if item.query_id in dev_ids]
    test = [item for item in labels if item.query_id not in dev_ids]
    band, dev_share = choose_band(dev, overlap, llm_verdict)
    truth = np.array([item.label for item in test], dtype=bool)
    test_contexts = [item.contexts()[0] for item in test]

    alone = agreement(unit_any(test, llm_verdict), truth, seed=args.seed)
    over = agreement(unit_any(test, {c: overlap[c] >= overlap_judge.overlap_ratio for c in test_contexts}), truth,
                     seed=args.seed)
    rows = ["| judge | accuracy | kappa [95% CI] | F1 | LLM calls / pairs |", "|---|---|---|---|---|",
            cells("token-overlap alone (no query boost)", over, "0"),
            cells("llm (SmolLM2) alone", alone, f"{len(test)} / {len(test)}")]
    notes = []
    for how, chosen in ((f"fitted on the dev half ({dev_share:.1%} of dev pairs to the LLM)", band),
                        ("fixed before looking", FIXED_BAND)):
        cascade = CascadeJudge([Stage(create_judge("token-overlap", query_boost=False), band=chosen),
                                create_judge("llm", **options)])
        units = unit_any(test, dict(zip(test_contexts, cascade.batch_judge(test_contexts), strict=True)))
        got = agreement(units, truth, seed=args.seed)
        calls = cascade.stats()["last_judge_calls"]
        rows.append(cells(f"cascade: token-overlap band [{chosen[0]}, {chosen[1]}) -> llm ({how})", got,
                          f"{calls} / {len(test)}"))
        notes.append(f"band [{chosen[0]}, {chosen[1]}) ({how}): LLM calls saved {1 - calls / len(test):.1%}, kappa "
                     f"{got.kappa - alone.kappa:+.3f} and accuracy {got.accuracy - alone.accuracy:+.3f} against the "
                     f"LLM alone; same verdict as the LLM alone on "
                     f"{float(np.mean(units == unit_any(test, llm_verdict))):.1%} of the test pairs")
    print(f"\ntest half: {len(test)} pairs ({truth.sum()} gold) of {len(qids) - len(dev_ids)} questions; dev half "
          f"{len(dev)} pairs\n")
    print("\n".join(rows) + "\n\n" + "\n".join(notes), flush=True)
    print(f"\n{uptime()}")


# -- dl19 ------------------------------------------------------------------------------------------------------
DL19_THRESHOLDS = [0.4498, 0.5551, 0.6684]  # query-similarity, fitted on the dev half (docs/benchmarks.md)
DL19_GRID = (0.0, 0.1, 0.2, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.9, 1.0)


def confusions(qids: list[str], ref: dict[str, list[int]], got: dict[str, list[float | None]]) -> np.ndarray:
    """Q x 4 x 4 per-query confusions (rows NIST, columns the judge), unmeasured grades left out."""
    out = np.zeros((len(qids), 4, 4))
    for q, qid in enumerate(qids):
        for truth, grade in zip(ref[qid], got[qid], strict=True):
            if grade is not None:
                out[q, truth, int(grade)] += 1
    return out


def graded_figures(per_query: np.ndarray, weights: np.ndarray) -> dict[str, tuple[float, np.ndarray]]:
    """The label figures of ``evret agreement`` (point value, resampled values) for one per-query table."""
    from evret_core.statistics import grade_agreement as ga

    point, resampled = per_query.sum(axis=0), np.tensordot(weights, per_query, axes=(1, 0))
    return {
        "exact": (float(ga.exact_agreement(point)), ga.exact_agreement(resampled)),
        "kappa": (float(ga.cohen_kappa(point)), ga.cohen_kappa(resampled)),
        "wk_quadratic": (float(ga.weighted_kappa(point, "quadratic")), ga.weighted_kappa(resampled, "quadratic")),
        "alpha": (float(ga.krippendorff_alpha(point)), ga.krippendorff_alpha(resampled)),
        "binary_2": (float(ga.cohen_kappa(ga.binary_confusions(point)[1])),
                     ga.cohen_kappa(ga.binary_confusions(resampled)[:, 1])),
    }


def ci(value: float, resampled: np.ndarray) -> str:
    finite = resampled[np.isfinite(resampled)]
    if not np.isfinite(value) or not finite.size:
        return "n/a"
    low, high = np.percentile(finite, [2.5, 97.5])
    return f"{value:.3f} [{low:.3f}, {high:.3f}]"


def simulate(scores: list[float], sim: list[float], llm: list[float | None], band: tuple[float, float]
             ) -> tuple[list[float | None], int]:
    """The cascade's grades and LLM calls, from the two judges' answers (for fitting the band)."""
    low, high = band
    out: list[float | None] = []
    calls = 0
    for score, a, b in zip(scores, sim, llm, strict=True):
        if score < low or score >= high:
            out.append(a)
        else:
            out.append(b)
            calls += 1
    return out, calls


def dl19(args: argparse.Namespace) -> None:
    """The graded cascade query-similarity -> relevance (SmolLM2) on the DL19 sample; see the module."""
    from relevance_dl19 import cache_name, prepare, stratified

    from evret_core.calibration.qrels_agreement import query_weights
    from evret_core.contracts.judge import JudgmentContext
    from evret_core.io.corpus import read_corpus

    print(f"$ uptime\n{uptime()}", flush=True)
    out = args.cache / "dl19"
    files = prepare(args.shared / "datasets" / "trec-dl-2019", out)
    test_rows = [r for r in files["qrels"] if r[0] in files["halves"]["test"]]
    population = {g: sum(1 for r in test_rows if r[2] == g) for g in range(4)}
    sample = stratified(test_rows, args.sample_size)
    topics = dict(line.split("\t", 1) for line in files["test"][0].read_text(encoding="utf-8").splitlines()
                  if line.strip())
    corpus = read_corpus(files["corpus"])
    contexts = [JudgmentContext(query=topics[q], expected_text="", retrieved_text=str(corpus[d]["text"]))
                for q, d, _ in sample]
    print(f"sample: {len(sample)} pairs over {len({q for q, _, _ in sample})} queries", flush=True)

    llm_options: dict[str, Any] = {"provider": "transformers", "model": "smollm2-135m", "fencing": "nonce",
                                   "provider_options": {"threads": 1},
                                   "cache": str(out / cache_name("smollm2-135m"))}
    llm: Any = create_judge("relevance", **llm_options)
    if args.cached_only:  # a stopped grading run: the sample's pairs whose answers the cache holds
        import sqlite3

        with sqlite3.connect(llm_options["cache"]) as db:
            have = {key for (key,) in db.execute("select key from judgments")}
        cached_at = [i for i, c in enumerate(contexts) if llm.cache_key(c) in have]
        sample, contexts = [sample[i] for i in cached_at], [contexts[i] for i in cached_at]
        print(f"cached: {len(sample)} pairs (NIST grades {[sum(1 for r in sample if r[2] == g) for g in range(4)]})",
              flush=True)
    plan = llm.plan(contexts)
    if plan.get("to_send"):
        sys.exit(f"{plan['to_send']} of the {len(contexts)} pairs are not in {llm_options['cache']}: grade them "
                 f"first with python benchmarks/relevance_dl19.py --sample-size {args.sample_size} --fencing nonce "
                 f"--skip-similarity (this mode sends no model call)")
    llm_grades = llm.batch_grade(contexts)
    cost = llm.stats()["cost"]["transformers"]
    print(f"relevance (SmolLM2): {len(contexts)} grades from the cache, {cost['calls']} model calls; "
          f"unmeasured {llm.stats()['unmeasured']}", flush=True)
    sim_options = {"thresholds": DL19_THRESHOLDS, "cache": str(out / "embeddings.sqlite")}
    sim_judge = create_judge("query-similarity", **sim_options)
    started = time.perf_counter()
    raw_scores, raw_grades = judge_scores(sim_judge, contexts), sim_judge.batch_grade(contexts)
    if any(v is None for v in raw_scores + raw_grades):
        sys.exit("query-similarity left a pair unscored")
    scores = [float(v) for v in raw_scores if v is not None]
    sim_grades = [float(v) for v in raw_grades if v is not None]
    print(f"query-similarity: {len(contexts)} scores in {time.perf_counter() - started:.1f} s", flush=True)

    qids = sorted({q for q, _, _ in sample})
    rng = np.random.default_rng(args.seed)
    dev_ids = set(rng.choice(qids, size=len(qids) // 2, replace=False).tolist())
    halves = {"dev": [q for q in qids if q in dev_ids], "test": [q for q in qids if q not in dev_ids], "all": qids}

    def by_query(values: list[Any], keep: list[str]) -> dict[str, list[Any]]:
        grouped: dict[str, list[Any]] = {q: [] for q in keep}
        for (q, _, _), value in zip(sample, values, strict=True):
            if q in grouped:
                grouped[q].append(value)
        return grouped

    truth = [g for _, _, g in sample]
    one = np.ones((1, len(halves["dev"])))
    dev_ref = by_query(truth, halves["dev"])
    alone_dev = graded_figures(confusions(halves["dev"], dev_ref, by_query(llm_grades, halves["dev"])), one)
    best: tuple[int, float, tuple[float, float]] | None = None
    dev_at = [i for i, (q, _, _) in enumerate(sample) if q in dev_ids]
    for low in DL19_GRID:
        for high in DL19_GRID:
            if high < low:
                continue
            grades, calls = simulate([scores[i] for i in dev_at], [sim_grades[i] for i in dev_at],
                                     [llm_grades[i] for i in dev_at], (low, high))
            got = graded_figures(confusions(halves["dev"], dev_ref, by_query_at(sample, dev_at, grades,
                                                                                halves["dev"])), one)
            if got["exact"][0] >= alone_dev["exact"][0] - 0.005 and got["kappa"][0] >= alone_dev["kappa"][0] - 0.005:
                key = (calls, -got["kappa"][0], (low, high))
                if best is None or key[:2] < best[:2]:
                    best = key
    fitted = best[2] if best is not None else (0.0, 1.0)
    print(f"band fitted on the dev half ({len(halves['dev'])} queries, {len(dev_at)} pairs): [{fitted[0]}, "
          f"{fitted[1]}), {best[0] if best else len(dev_at)} of {len(dev_at)} dev pairs to the LLM", flush=True)
    fixed = (DL19_THRESHOLDS[0], DL19_THRESHOLDS[2])

    share = {g: population[g] / sum(population.values()) / (sum(1 for t in truth if t == g) / len(truth))
             for g in range(4)}
    for half in ("test", "all"):
        keep = halves[half]
        at = [i for i, (q, _, _) in enumerate(sample) if q in set(keep)]
        ref = by_query(truth, keep)
        weights = query_weights(len(keep), 1000, args.seed)
        alone = graded_figures(confusions(keep, ref, by_query(llm_grades, keep)), weights)
        rows = ["| judge | exact | Cohen's kappa | weighted kappa, quadratic | Krippendorff's alpha | binary kappa, "
                "cut 2 | LLM calls / pairs (reweighted share) |", "|---|---|---|---|---|---|---|"]

        def row(name: str, figures: dict[str, tuple[float, np.ndarray]], calls: str) -> str:
            return (f"| {name} | {ci(*figures['exact'])} | {ci(*figures['kappa'])} | "
                    f"{ci(*figures['wk_quadratic'])} | {ci(*figures['alpha'])} | {ci(*figures['binary_2'])} | "
                    f"{calls} |")

        sim_fig = graded_figures(confusions(keep, ref, by_query(sim_grades, keep)), weights)
        rows.append(row("query-similarity alone", sim_fig, f"0 / {len(at)}"))
        rows.append(row("relevance (SmolLM2) alone", alone, f"{len(at)} / {len(at)} (100%)"))
        notes = []
        bands = [("fitted on the dev half", fitted), ("fixed before looking: [t1, t3)", fixed)]
        for how, band in bands if half == "test" else bands[1:]:
            cascade = CascadeJudge([Stage(create_judge("query-similarity", **sim_options), band=band),
                                    create_judge("relevance", **llm_options)])
            grades = cascade.batch_grade([contexts[i] for i in at])
            stats = cascade.stats()
            calls = int(stats["last_judge_calls"])
            sent = sum(int(c.get("calls", 0)) for c in stats.get("cost", {}).values())
            in_band = [i for i in at if band[0] <= scores[i] < band[1]]
            weighted = sum(share[truth[i]] for i in in_band) / sum(share[truth[i]] for i in at)
            got = graded_figures(confusions(keep, ref, by_query_at(sample, at, grades, keep)), weights)
            rows.append(row(f"cascade: query-similarity band [{band[0]}, {band[1]}) -> relevance ({how})", got,
                            f"{calls} / {len(at)} ({weighted:.0%})"))
            deltas = ", ".join(f"{name} {got[key][0] - alone[key][0]:+.3f} "
                               f"{ci(got[key][0] - alone[key][0], got[key][1] - alone[key][1]).split(' ', 1)[1]}"
                               for key, name in (("exact", "exact"), ("kappa", "kappa"), ("wk_quadratic",
                                                 "quadratic weighted kappa"), ("binary_2", "binary kappa at 2")))
            same = float(np.mean([g == llm_grades[i] for g, i in zip(grades, at, strict=True)]))
            notes.append(f"band [{band[0]}, {band[1]}) ({how}): LLM calls saved {1 - calls / len(at):.1%} of the "
                         f"sample ({1 - weighted:.1%} reweighted to the test half's grade shares); {sent} model "
                         f"calls sent (cache); against the LLM alone: {deltas}; same grade as the LLM alone on "
                         f"{same:.1%} of the pairs")
        print(f"\n{half}: {len(keep)} queries, {len(at)} pairs (NIST grades "
              f"{[sum(1 for i in at if truth[i] == g) for g in range(4)]})\n")
        print("\n".join(rows) + "\n\n" + "\n".join(notes), flush=True)
    print(f"\n{uptime()}")


def by_query_at(sample: list[tuple[str, str, int]], at: list[int], values: list[Any], keep: list[str]
                ) -> dict[str, list[Any]]:
    """``values`` (one per sample index in ``at``) grouped by query, in sample order."""
    grouped: dict[str, list[Any]] = {q: [] for q in keep}
    for i, value in zip(at, values, strict=True):
        grouped[sample[i][0]].append(value)
    return grouped


if __name__ == "__main__":
    main()
