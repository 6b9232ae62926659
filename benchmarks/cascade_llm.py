"""The cascade judge with a real LLM behind it: SQuAD 2.0 subset, token-overlap -> ``llm`` on SmolLM2-135M-Instruct.

``--questions`` answerable questions (seeded sample of the 386) over the subset's 83 paragraphs, BM25 top
``--top`` each: every (question, paragraph) pair is one judgment, true when the paragraph is the question's own
(gold); the expected answer is the first gold answer string (one LLM call per pair). The ``llm`` judge runs on the
packaged SmolLM2 (provider ``transformers``, one thread, answers cached in SQLite under ``--cache``: a stopped run
resumes; pairs are judged best rank first, so a partial run is a whole shallower top). The questions are split in
seeded halves: the band of ``token-overlap`` (no query boost) is fitted on the dev half (the fewest LLM calls whose
accuracy and kappa stay within 0.005 of the LLM alone there, ``benchmarks/calibration.py``'s rule) and the real
``CascadeJudge`` runs on the test half, counting its own LLM calls (replayed from the cache: the counts are the
cascade's calls, not new model calls). A fixed band chosen before looking, [0.1, 0.8), is reported beside.

Usage: python benchmarks/cascade_llm.py [--shared ../shared] [--cache /tmp/evret-bench] [--questions 60] [--top 5]
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
    args = parser.parse_args()
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


if __name__ == "__main__":
    main()
