"""Which judgments to label: a seeded sample stratified over a judge's scores, and where candidates come from.

A simple random sample of judgments is almost all clear negatives (nine retrieved passages in ten hold no
answer), so it says little about the band where the judge hesitates. The planner cuts the score range into
equal-width strata and gives every non-empty stratum the same share of the sample (a stratum smaller than its
share gives the rest to the others), so the middle of the range, where the threshold sits, is labelled densely.
Each row records its stratum and score so that the sample can be reweighted to the population later.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from evret_core.calibration.calibrate import unit_scores
from evret_core.calibration.labels import LabelledJudgment
from evret_core.contracts.errors import EvretError
from evret_core.io.outputs import write_output
from evret_core.judge.thresholds import judge_name


def candidates_from_results(results: Any) -> list[LabelledJudgment]:
    """One unlabelled judgment per (text-labelled query, expected answer, retrieved document) of a results
    object, in order, deduplicated. The results must hold the retrieved texts (``evret evaluate`` keeps them)."""
    seen: dict[tuple[str, str, str], LabelledJudgment] = {}
    for qid, qr in results.per_query.items():
        if qr.labelled_by != "text":
            continue
        for j in qr.judgments:
            if not j.text:
                continue
            for expected in qr.expected_answers:
                key = (qid, expected, j.text)
                if key not in seen:
                    seen[key] = LabelledJudgment(query_id=qid, query=qr.query_text, expected=(expected,),
                                                 retrieved_text=j.text, label=None, doc_id=j.doc_id,
                                                 where=f"query {qid!r} rank {j.rank}")
    return list(seen.values())


def labels_from_results(results: Any, qrels: Mapping[str, Mapping[str, float]]) -> list[LabelledJudgment]:
    """Labels derived from ids: one judgment per (text-labelled query with qrels, retrieved document); all of
    the query's expected answers are alternatives, and the label is whether the document is relevant."""
    from evret_core.calibration.labels import derive_labels
    from evret_core.io.datasets import EvaluationDataset
    from evret_core.io.queries import QueryExample

    queries = [QueryExample(query_id=qid, query_text=qr.query_text, expected_answers=qr.expected_answers)
               for qid, qr in results.per_query.items() if qr.labelled_by == "text" and qr.expected_answers]
    if not queries:
        raise EvretError("the results hold no text-labelled query: labels from ids need a text-labelled run")
    retrieved = {qid: [(j.doc_id, j.text or "") for j in qr.judgments] for qid, qr in results.per_query.items()}
    return derive_labels(EvaluationDataset(queries=queries), qrels, retrieved)


def plan_sample(
    judge: Any,
    candidates: Sequence[LabelledJudgment],
    n: int,
    seed: int = 0,
    strata: int = 10,
) -> list[LabelledJudgment]:
    """``n`` candidates to label, stratified over ``judge``'s scores (see the module docstring); each returned
    judgment's ``extra`` holds its ``score``, ``stratum`` and the ``judge`` name, and its label is null."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise EvretError(f"--plan: the number of judgments to label must be a positive integer, got {n!r}")
    if strata < 1:
        raise EvretError(f"strata must be a positive integer, got {strata}")
    if not candidates:
        raise EvretError("nothing to plan: no candidate judgments (text-labelled queries with retrieved texts)")
    if isinstance(judge, str):
        from evret_core.plugins.registry import create_judge

        judge = create_judge(judge)
    scores = unit_scores(judge, candidates)
    # an unmeasured score (None) gets a stratum of its own: a person's label is most needed there
    stratum_of = [strata if s is None else min(strata - 1, int(math.floor(s * strata))) for s in scores]
    members: dict[int, list[int]] = {}
    for i, s in enumerate(stratum_of):
        members.setdefault(s, []).append(i)
    quota = allocate(n, {k: len(v) for k, v in members.items()})
    rng = np.random.default_rng(seed)
    chosen: list[int] = []
    for stratum in sorted(members):
        pool = members[stratum]
        take = quota.get(stratum, 0)
        if take:
            chosen.extend(int(pool[j]) for j in rng.choice(len(pool), size=take, replace=False))
    rng.shuffle(chosen)  # a person labelling in file order should not see the judge's ranking
    name = judge_name(judge)
    out = []
    for i in chosen:
        item = candidates[i]
        score = scores[i]
        extra = {"score": None if score is None else round(score, 6), "stratum": _stratum_label(stratum_of[i], strata),
                 "judge": name}
        out.append(LabelledJudgment(query_id=item.query_id, query=item.query, expected=item.expected,
                                    retrieved_text=item.retrieved_text, label=None, doc_id=item.doc_id,
                                    where=item.where, extra=extra))
    return out


def allocate(n: int, sizes: Mapping[int, int]) -> dict[int, int]:
    """Split ``n`` as evenly as possible over strata of the given sizes, never more than a stratum holds."""
    quota = {k: 0 for k in sizes}
    left = min(n, sum(sizes.values()))
    open_ = sorted(k for k, size in sizes.items() if size > 0)
    while left > 0 and open_:
        share, extra = divmod(left, len(open_))
        for rank, k in enumerate(open_):
            give = min(share + (1 if rank < extra else 0), sizes[k] - quota[k])
            quota[k] += give
            left -= give
        open_ = [k for k in open_ if quota[k] < sizes[k]]
    return quota


def _stratum_label(index: int, strata: int) -> str:
    if index == strata:
        return "unmeasured"
    return f"[{index / strata:.2f}, {(index + 1) / strata:.2f}{']' if index == strata - 1 else ')'}"


def write_plan(path: str | Path, sample: Sequence[LabelledJudgment]) -> None:
    """Write the sample as JSONL, one judgment per line with ``"label": null`` for a person to fill in."""
    text = "".join(json.dumps(item.to_record(), ensure_ascii=False) + "\n" for item in sample)
    if str(path) == "-":
        import sys

        sys.stdout.write(text)
        return
    write_output(Path(path), text)
