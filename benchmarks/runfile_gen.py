"""Synthetic TREC run and qrels files for the big-run benchmarks (evaluator.py ``--trec``, ray.py ``--big``).

Lines are built with numpy in fixed-width fields (TREC files allow any whitespace), so writing 100 million lines
takes seconds, not minutes: ``q0000042 Q0 d0000042_007 008 12.3 bench``. Per query: 100 documents with scores
0.0-20.0 in steps of 0.1 (ties occur), and 1-10 judged documents among 120 (some not retrieved), grades 1-3.
Queries come in blocks of 10,000, each from its own seed, so a block can be rebuilt in memory (as dicts) alone.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

BLOCK = 10_000
DEPTH = 100
POOL = 120


def _digits(values: np.ndarray, width: int) -> np.ndarray:
    out = np.empty((len(values), width), dtype=np.uint8)
    v = values.astype(np.int64)
    for k in range(width - 1, -1, -1):
        out[:, k] = 48 + v % 10
        v //= 10
    return out


def _const(text: bytes, n: int) -> np.ndarray:
    return np.tile(np.frombuffer(text, dtype=np.uint8), (n, 1))


_SCORES = np.hstack([_digits(np.arange(201) // 10, 2), _const(b".", 201), _digits(np.arange(201) % 10, 1)])


def _draw(block: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng([7, block])
    first, stop = block * BLOCK, min((block + 1) * BLOCK, n)
    queries = np.arange(first, stop)
    scores = rng.integers(0, 201, size=(len(queries), DEPTH))
    counts = rng.integers(1, 11, size=len(queries))
    picks = rng.random((len(queries), POOL)).argsort(axis=1)[:, :10]
    grades = rng.integers(1, 4, size=(len(queries), 10))
    return queries, scores, counts, picks, grades


def block_text(block: int, n: int) -> tuple[bytes, bytes]:
    """Block ``block`` of an ``n``-query case as run-file and qrels-file bytes."""
    queries, scores, counts, picks, grades = _draw(block, n)
    lines = len(queries) * DEPTH
    qd = np.repeat(_digits(queries, 7), DEPTH, axis=0)
    docs = np.tile(np.hstack([_const(b"_", DEPTH), _digits(np.arange(DEPTH), 3), _const(b" ", DEPTH),
                              _digits(np.arange(1, DEPTH + 1), 3), _const(b" ", DEPTH)]), (len(queries), 1))
    run = np.hstack([_const(b"q", lines), qd, _const(b" Q0 d", lines), qd, docs, _SCORES[scores.ravel()],
                     _const(b" bench\n", lines)])
    keep = np.arange(10)[None, :] < counts[:, None]
    rq = np.repeat(queries, counts)
    rd, rg = picks[keep], grades[keep]
    judged = len(rq)
    qrd = _digits(rq, 7)
    qrels = np.hstack([_const(b"q", judged), qrd, _const(b" 0 d", judged), qrd, _const(b"_", judged),
                       _digits(rd, 3), _const(b" ", judged), _digits(rg, 1), _const(b"\n", judged)])
    return run.tobytes(), qrels.tobytes()


def block_dicts(block: int, n: int) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    """The same block as ``{qid: {doc: score}}`` and ``{qid: {doc: grade}}`` (built apart from the file)."""
    queries, scores, counts, picks, grades = _draw(block, n)
    run: dict[str, dict[str, float]] = {}
    qrels: dict[str, dict[str, float]] = {}
    for i, qn in enumerate(queries.tolist()):
        qid = f"q{qn:07d}"
        run[qid] = {f"d{qn:07d}_{d:03d}": s / 10 for d, s in enumerate(scores[i].tolist())}
        qrels[qid] = {f"d{qn:07d}_{d:03d}": float(g) for d, g in zip(picks[i, : counts[i]].tolist(),
                                                                       grades[i, : counts[i]].tolist(), strict=True)}
    return run, qrels


def write(folder: Path, n: int) -> tuple[Path, Path]:
    """``run.trec`` and ``qrels`` for ``n`` queries in ``folder``."""
    run_path, qrels_path = folder / "run.trec", folder / "qrels"
    with run_path.open("wb") as run_file, qrels_path.open("wb") as qrels_file:
        for block in range(-(-n // BLOCK)):
            run, qrels = block_text(block, n)
            run_file.write(run)
            qrels_file.write(qrels)
    return run_path, qrels_path
