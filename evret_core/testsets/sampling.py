"""Seeded, stratified sampling of source documents (and partners for two-document questions) from a corpus.

Strata are the values of a corpus field (``stratify_by="title"``, or any field of the corpus records), or, by
default, the quartiles of document length, so that short and long documents are both asked about. ``n`` is split
over the strata in proportion to their size (largest remainders; every stratum gets one when ``n`` allows), and
documents are drawn without replacement. Question types are dealt over the draws in the proportions asked for.
A two-document question (multi-hop, comparison) pairs its document with the most similar other document (shared
content words) among a seeded handful of candidates.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evret_core.contracts.errors import EvretError, did_you_mean

TYPES = ("factoid", "multi-hop", "comparison", "unanswerable")
DEFAULT_MIX = {"factoid": 0.5, "multi-hop": 0.2, "comparison": 0.15, "unanswerable": 0.15}
TWO_DOCUMENT = ("multi-hop", "comparison")
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass
class Sample:
    """One planned question: its type, source document ids (two for two-document types) and stratum."""

    qtype: str
    doc_ids: list[str]
    stratum: str
    info: dict[str, Any] = field(default_factory=dict)


def parse_mix(spec: str | Mapping[str, float] | None) -> dict[str, float]:
    """``"factoid=0.6,unanswerable=0.4"`` or a mapping -> normalised proportions; errors name ``--types``."""
    if spec is None:
        return dict(DEFAULT_MIX)
    if isinstance(spec, str):
        items: dict[str, float] = {}
        for part in (p.strip() for p in spec.split(",") if p.strip()):
            name, sep, value = part.partition("=")
            try:
                items[name.strip()] = float(value) if sep else 1.0
            except ValueError:
                raise EvretError(f"--types {part!r}: the weight must be a number") from None
        spec = items
    unknown = [t for t in spec if t not in TYPES]
    if unknown:
        raise EvretError(f"--types: unknown question type(s) {', '.join(unknown)}{did_you_mean(unknown[0], TYPES)}; "
                         f"use {', '.join(TYPES)}")
    if any(not (w >= 0 and np.isfinite(w)) for w in spec.values()) or sum(spec.values()) <= 0:
        raise EvretError("--types: weights must be finite, non-negative and not all zero")
    total = sum(spec.values())
    return {t: float(w) / total for t, w in spec.items() if w > 0}


def _strata(corpus: Mapping[str, Mapping[str, Any]], stratify_by: str | None) -> dict[str, list[str]]:
    ids = list(corpus)
    if stratify_by:
        missing = [d for d in ids if corpus[d].get(stratify_by) in (None, "")]
        if len(missing) == len(ids):
            raise EvretError(f"--stratify-by {stratify_by!r}: no corpus document has that field")
        groups: dict[str, list[str]] = {}
        for d in ids:
            groups.setdefault(str(corpus[d].get(stratify_by) or "(none)"), []).append(d)
        return groups
    lengths = np.array([len(str(corpus[d].get("text", ""))) for d in ids], dtype=np.float64)
    edges = np.quantile(lengths, [0.25, 0.5, 0.75]) if len(ids) >= 4 else np.array([])
    bins = np.searchsorted(edges, lengths, side="right")
    groups = {}
    for d, b in zip(ids, bins, strict=True):
        groups.setdefault(f"length-q{int(b) + 1}", []).append(d)
    return groups


def _allocate(n: int, sizes: dict[str, int]) -> dict[str, int]:
    total = sum(sizes.values())
    exact = {k: n * s / total for k, s in sizes.items()}
    out = {k: min(sizes[k], int(v)) for k, v in exact.items()}
    if n >= len(sizes):
        for k in out:
            if out[k] == 0 and sizes[k] > 0:
                out[k] = 1
    order = sorted(sizes, key=lambda k: exact[k] - int(exact[k]), reverse=True)
    while sum(out.values()) < n and any(out[k] < sizes[k] for k in order):
        for k in order:
            if sum(out.values()) >= n:
                break
            if out[k] < sizes[k]:
                out[k] += 1
    while sum(out.values()) > n:  # the one-per-stratum floor overshot: trim the largest
        k = max(out, key=lambda key: out[key])
        out[k] -= 1
    return out


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) > 3}


def stratified_sample(corpus: Mapping[str, Mapping[str, Any]], n: int, seed: int = 0,
                      mix: Mapping[str, float] | None = None, stratify_by: str | None = None) -> list[Sample]:
    """``n`` planned questions over ``corpus`` (doc id -> record with ``text``), reproducible for a seed."""
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 100_000:
        raise EvretError(f"-n must be an integer from 1 to 100000, got {n!r}")
    if not corpus:
        raise EvretError("the corpus has no documents")
    n = min(n, len(corpus))
    rng = np.random.default_rng(seed)
    groups = _strata(corpus, stratify_by)
    quota = _allocate(n, {k: len(v) for k, v in groups.items()})
    drawn: list[tuple[str, str]] = []
    for stratum in sorted(groups):
        members = groups[stratum]
        picks = rng.choice(len(members), size=quota[stratum], replace=False).tolist() if quota[stratum] else []
        drawn += [(members[int(i)], stratum) for i in picks]
    order = rng.permutation(len(drawn))
    drawn = [drawn[int(i)] for i in order]
    proportions = parse_mix(dict(mix) if mix is not None else None)
    counts = _allocate(len(drawn), {t: max(1, round(w * 10_000)) for t, w in proportions.items()})
    types = [t for t in sorted(counts, key=lambda t: TYPES.index(t)) for _ in range(counts[t])]
    words = {d: _words(str(corpus[d].get("title", "")) + " " + str(corpus[d].get("text", ""))) for d in corpus}
    ids = list(corpus)
    samples = []
    for (doc_id, stratum), qtype in zip(drawn, types, strict=True):
        doc_ids = [doc_id]
        if qtype in TWO_DOCUMENT and len(ids) > 1:
            candidates = [ids[int(i)] for i in rng.choice(len(ids), size=min(len(ids), 25), replace=False)]
            candidates = [c for c in candidates if c != doc_id] or [i for i in ids if i != doc_id][:1]
            partner = max(candidates, key=lambda c: (len(words[c] & words[doc_id]), c))
            doc_ids.append(partner)
        samples.append(Sample(qtype, doc_ids, stratum))
    return samples
