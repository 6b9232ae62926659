"""The retrieved rows of a precomputed run read as columns (:class:`~evret_core.io.runcolumns.ColumnarRun`).

The Evaluator never turns such a run into dicts as a whole: a metric chunk builds its 2,048 queries' dicts, scores
them as the dict path does (:class:`~evret_core.evaluation.retrieved.RetrievedRows` over the chunk, so the results
are the same by construction) and drops them; a query's ranked row is built when its detail is asked for.
:func:`precomputed_rows` gives any precomputed run's rows (these for a run read as columns).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from evret_core.contracts.errors import EvretError
from evret_core.contracts.metric import RankedBatch
from evret_core.evaluation.retrieved import EMPTY, RetrievedRows, Row, coerce_row
from evret_core.io.queries import QueryExample
from evret_core.io.runcolumns import ColumnarRun
from evret_core.results.per_query import TextJudgments

__all__ = ["ColumnarRows", "precomputed_rows"]


class _LazyRows(Sequence[Row]):
    """``rows[i]``: query ``i``'s ``{doc_id: score}`` dict (or the empty row), built on each access."""

    def __init__(self, owner: ColumnarRows) -> None:
        self.owner = owner

    def __len__(self) -> int:
        return len(self.owner.positions)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self.owner.raw(j) for j in range(*i.indices(len(self)))]
        return self.owner.raw(int(i))


class ColumnarRows(RetrievedRows):
    """Every dataset query's row, read from a :class:`ColumnarRun` when asked for (``positions[i]``: query
    ``i``'s place in the run, -1 when the run lacks it). ``len`` and ``row(i)`` are the base class's, over the
    lazy rows."""

    def __init__(self, run: ColumnarRun, positions: np.ndarray, k: int) -> None:
        self.run = run
        self.positions = positions
        super().__init__(_LazyRows(self), k)  # type: ignore[arg-type]

    def empty_indexes(self) -> list[int]:
        """The queries the run lacks or holds no document for, read off the run's offsets (no dict is built)."""
        sizes = np.diff(self.run.offsets)
        if not len(sizes):
            return list(range(len(self.positions)))
        empty = (self.positions < 0) | (sizes[np.maximum(self.positions, 0)] == 0)
        return [int(i) for i in np.flatnonzero(empty)]

    def raw(self, i: int) -> Row:
        at = int(self.positions[i])
        return EMPTY if at < 0 else self.run.query(at)

    def batch(
        self,
        queries: Sequence[QueryExample],
        start: int,
        stop: int,
        text: Mapping[int, TextJudgments],
        any_match: bool,
    ) -> RankedBatch:
        """As :meth:`RetrievedRows.batch`, over this chunk's dicts only."""
        dicts = self.run.queries(self.positions[start:stop].tolist())
        chunk = RetrievedRows([d if d else EMPTY for d in dicts], self.k)
        shifted = {i - start: judged for i, judged in text.items() if start <= i < stop}
        return chunk.batch(queries[start:stop], 0, stop - start, shifted, any_match)


def precomputed_rows(run: Mapping[str, Any], ids: Sequence[str], k: int, missing_queries: str = "error"
                     ) -> tuple[RetrievedRows, list[str]]:
    """A precomputed run's rows for the queries ``ids``, and the ids it lacks (an error naming them unless
    ``missing_queries`` is ``"zero"``: then they retrieved nothing); a run read as columns (``read_run_columns``)
    stays columns (a chunk's dicts are built when its metrics are computed)."""
    positions = run.positions(ids) if isinstance(run, ColumnarRun) else None
    if positions is not None:
        missing = [ids[i] for i in np.flatnonzero(positions < 0).tolist()]
    else:
        missing = [qid for qid in ids if qid not in run]
    if missing and missing_queries == "error":
        shown = ", ".join(repr(q) for q in missing[:5])
        raise EvretError(
            f"the precomputed run lacks {len(missing)} of the dataset's {len(ids)} queries ({shown}"
            f"{', ...' if len(missing) > 5 else ''}); fix the run's query ids, or score them 0 with "
            f"missing_queries='zero' (CLI: --missing-queries zero)"
        )
    if isinstance(run, ColumnarRun) and positions is not None:
        return ColumnarRows(run, positions, k), missing
    absent = object()  # a dict row is kept as it is, before any per-query message is built
    return RetrievedRows([EMPTY if (raw := run.get(qid, absent)) is absent else raw if type(raw) is dict
                          else coerce_row(raw, f"precomputed run, query {qid!r}", k)
                          for qid in ids], k), missing
