"""TREC qrels and run files: read them into the dict formats of pytrec_eval and ranx, write runs and qrels back;
TREC topics as a TSV file (``query_id<TAB>text`` per line, :func:`read_topics`).

qrels: ``query_id iteration doc_id grade`` per line. run: ``query_id Q0 doc_id rank score run_tag`` per line
(fields 7 to 11 are ignored, as trec_eval does; a line of 12 fields or more is an error: two lines joined by a
lost line end, or a file whose lines end in a carriage return alone, which trec_eval would read as one line). Fields are separated by any whitespace, so ids may contain any other character ('#', ':', '/'...).
Blank lines and lines whose first field starts with '#' are skipped. Every error names the file and line. The
files are read block by block into columns (:mod:`evret_core.io.trecscan`, compiled where it was built),
then into dicts.
"""

from __future__ import annotations

import math
from collections.abc import Container, Mapping
from pathlib import Path

import numpy as np

from evret_core.contracts.errors import EvretError
from evret_core.io.jsonio import read_text
from evret_core.io.outputs import write_output
from evret_core.io.trecscan import TrecRun

__all__ = ["Qrels", "Run", "TrecRun", "read_qrels", "read_qrels_file", "read_run", "read_topics", "ranked_docs",
           "write_qrels", "write_run"]

Qrels = dict[str, dict[str, float]]
Run = dict[str, dict[str, float]]


def read_qrels(path: str | Path, queries: Container[str] | None = None, threads: int | None = None) -> Qrels:
    """Read a TREC qrels file into ``{query_id: {doc_id: grade}}``; a document judged twice is an error.

    ``queries``: keep only these queries' judgments (a shard of a big run needs only its own; every line is
    still checked, and a document judged twice only in the kept queries). ``threads``: as for
    :func:`read_run`.
    """
    from evret_core.io.runcolumns import pick_threads, read_columns
    from evret_core.io.trecscan import compiled

    def kept(qid: str) -> bool:
        return queries is None or qid in queries

    threads = pick_threads(path, 0, None, threads)  # (checked on both paths; the numpy path reads on one)
    if compiled() is not None:  # the dicts built as the file is read
        qrels: Qrels = {}
        # a dict or set is checked by the scan, which then makes no objects for the other queries' lines
        filtered = type(queries) in (dict, set, frozenset)
        reader = read_columns(path, 4, into=qrels, keep=queries if filtered else None,  # type: ignore[arg-type]
                              threads=threads)
        if reader.repeats:
            reader.raise_repeat(kept, judged=True)  # a repeat in a query not kept is no error
        reader.raise_error()
        return qrels if queries is None or filtered else {q: d for q, d in qrels.items() if q in queries}
    reader = read_columns(path, 4)
    columns = reader.finish()  # grouped by query, in the order of each query's first line
    keep = range(len(columns)) if queries is None else [i for i, q in enumerate(columns.qids) if q in queries]
    judged = columns.queries(keep)
    counts = np.diff(columns.offsets)[list(keep)].tolist()
    if any(len(d) != n for d, n in zip(judged, counts, strict=True)):
        reader.raise_repeat(kept, judged=True)
    reader.raise_error()
    return dict(zip([columns.qids[i] for i in keep], judged, strict=True))



def read_qrels_file(path: str | Path) -> Qrels:
    """A qrels file in either form users have: BEIR's TSV (``query-id corpus-id score``, a header line allowed) when
    its first line has three tab-separated fields, else TREC qrels (four columns); errors name the file and line."""
    from evret_core.io.dataset_files import read_beir_qrels

    first = next((line for line in read_text(path, "qrels file").split("\n") if line.strip()), "")
    if len(first.rstrip("\r").split("\t")) == 3:
        return read_beir_qrels(Path(path))
    return read_qrels(path)

def read_run(path: str | Path, threads: int | None = None) -> TrecRun:
    """Read a TREC run file into ``{query_id: {doc_id: score}}`` (the rank column is ignored, as in trec_eval).

    A document listed twice for a query is an error naming the query, the document and both lines; a line of 12
    fields or more is an error (two lines joined), where trec_eval would ignore every field after the sixth.
    ``threads``: how many threads scan the file's blocks while this one builds the dicts (1: this one does both);
    by default one for a file of 24 MiB or less, else one per CPU the process may use, at most 4. The dicts are
    the same; what threads save is wall time (CPU time grows a little).
    """
    from evret_core.io.runcolumns import read_run_dicts

    return read_run_dicts(path, threads)


def ranked_docs(scores: Mapping[str, float]) -> list[str]:
    """A query's documents in trec_eval order: score descending, ties by document id in descending order."""
    # two stable sorts: by id descending, then by score descending (reverse=True keeps ties in place)
    return sorted(sorted(scores, reverse=True), key=scores.__getitem__, reverse=True)


def write_run(path: str | Path, run: Mapping[str, Mapping[str, float]], tag: str = "evret") -> None:
    """Write ``{query_id: {doc_id: score}}`` as a TREC run, each query's documents in trec_eval order."""
    if not tag or any(c.isspace() for c in tag):
        raise EvretError(f"write_run: the run tag must be a non-empty word without spaces, got {tag!r}")
    lines: list[str] = []
    for qid, scores in run.items():
        qid = str(qid)
        if not qid or any(c.isspace() for c in qid):
            raise EvretError(f"write_run: query id {qid!r} is empty or contains whitespace")
        for rank, doc in enumerate(ranked_docs(scores), start=1):
            if not doc or any(c.isspace() for c in doc):
                raise EvretError(f"write_run: query {qid}: document id {doc!r} is empty or contains whitespace")
            lines.append(f"{qid} Q0 {doc} {rank} {float(scores[doc])!r} {tag}\n")
    write_output(path, "".join(lines))


def write_qrels(path: str | Path, qrels: Mapping[str, Mapping[str, float]], option: str = "") -> None:
    """Write ``{query_id: {doc_id: grade}}`` as TREC qrels (``query_id 0 doc_id grade``), in the order given; a
    grade is written as an integer when it is one (``2``, not ``2.0``). Ids holding whitespace and grades that
    are not finite numbers are refused before anything is written (``option`` names the output in errors)."""
    lines: list[str] = []
    for qid, judged in qrels.items():
        qid = str(qid)
        if not qid or any(c.isspace() for c in qid):
            raise EvretError(f"write_qrels: query id {qid!r} is empty or contains whitespace")
        for doc, grade in judged.items():
            doc = str(doc)
            if not doc or any(c.isspace() for c in doc):
                raise EvretError(f"write_qrels: query {qid}: document id {doc!r} is empty or contains whitespace")
            if isinstance(grade, bool) or not isinstance(grade, (int, float)) or not math.isfinite(grade):
                raise EvretError(f"write_qrels: query {qid}, document {doc}: grade {grade!r} is not a finite number")
            value = float(grade)
            lines.append(f"{qid} 0 {doc} {int(value) if value.is_integer() else repr(value)}\n")
    write_output(path, "".join(lines), option)


def read_topics(path: str | Path) -> dict[str, str]:
    """A TREC topics TSV file as ``{query_id: text}``, in file order: one ``query_id<TAB>text`` per line (blank
    lines skipped). A line without a tab, an empty id or text, or a repeated id is an error naming the file and
    line."""
    topics: dict[str, str] = {}
    first: dict[str, int] = {}
    for lineno, line in enumerate(read_text(path, "topics file").split("\n"), start=1):
        if not line.strip():
            continue
        qid, tab, text = line.partition("\t")
        qid, text = qid.strip(), text.strip()
        where = f"{path}:{lineno}"
        if not tab:
            raise EvretError(f"{where}: expected query_id<TAB>text, found no tab")
        if not qid or any(c.isspace() for c in qid):
            raise EvretError(f"{where}: the query id {qid!r} is empty or contains whitespace")
        if not text:
            raise EvretError(f"{where}: query {qid} has no text")
        if qid in topics:
            raise EvretError(f"{where}: duplicate query id {qid!r} (first on line {first[qid]})")
        topics[qid] = text
        first[qid] = lineno
    if not topics:
        raise EvretError(f"{path}: the topics file has no queries")
    return topics
