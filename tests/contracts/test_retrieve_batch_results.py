"""``RankedColumns.batch_to_results``: an adapter's whole object path in one call, the same results as
``to_results`` per query, with the objects that existed before the call set aside from the garbage collector while
it runs (``gc.freeze``), each query's results set aside once built, and all put back after, whatever happens; a
process that froze objects itself or switched the collector off is left as it is."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from evret_core.contracts.errors import EvretError
from evret_core.contracts.retrieve import RankedColumns, RetrievalResult


def _answers(seen: list[tuple[int, bool]], n: int = 3) -> Iterator[tuple[RankedColumns, list[dict[str, Any]] | None]]:
    """Per query its columns and metadata, noting the collector's state while the generator runs."""
    for q in range(n):
        seen.append((gc.get_freeze_count(), gc.isenabled()))
        ids = np.array([f"q{q}d{i}" for i in range(4)], dtype=object)
        columns = RankedColumns(ids, -np.arange(4, dtype=np.float64), [f"text {i}" for i in range(4)])
        yield columns, (None if q == 0 else [{"text": f"text {i}", "distance": float(i)} for i in range(4)])


@pytest.fixture(autouse=True)
def _collector_as_found() -> Iterator[None]:
    enabled, frozen = gc.isenabled(), gc.get_freeze_count()
    yield
    if gc.get_freeze_count() and not frozen:
        gc.unfreeze()
    if enabled:
        gc.enable()


def test_the_results_are_to_results_per_query() -> None:
    got = RankedColumns.batch_to_results(_answers([]))
    expected = [columns.to_results(metadata=metadata) for columns, metadata in _answers([])]
    assert got == expected and [[repr(r) for r in q] for q in got] == [[repr(r) for r in q] for q in expected]
    assert got[1][2] == RetrievalResult(doc_id="q1d2", score=-2.0, metadata={"text": "text 2", "distance": 2.0})
    assert got[0][0].metadata == {"text": "text 0"}
    assert RankedColumns.batch_to_results(iter(())) == []


def test_old_objects_are_set_aside_during_the_call_and_put_back_after() -> None:
    assert gc.get_freeze_count() == 0
    old = object.__new__(RetrievalResult)  # a tracked object that exists before the call
    seen: list[tuple[int, bool]] = []
    RankedColumns.batch_to_results(_answers(seen))
    assert all(frozen > 0 and enabled for frozen, enabled in seen) and len(seen) == 3
    assert seen[0][0] < seen[1][0] - 4 < seen[2][0] - 8  # each query's 4 results set aside before the next
    assert gc.get_freeze_count() == 0 and gc.isenabled() and gc.is_tracked(old)


def test_the_collector_is_put_back_when_the_backend_fails() -> None:
    def failing() -> Iterator[tuple[RankedColumns, None]]:
        yield RankedColumns(["d"], [1.0]), None
        raise EvretError("chroma retriever: the server went away")

    with pytest.raises(EvretError, match="server went away"):
        RankedColumns.batch_to_results(failing())
    assert gc.get_freeze_count() == 0 and gc.isenabled()
    with pytest.raises(EvretError, match="2 metadata dicts for 1 rows"):
        RankedColumns.batch_to_results(iter([(RankedColumns(["d"], [1.0]), [{}, {}])]))
    assert gc.get_freeze_count() == 0


def test_a_process_that_froze_objects_or_switched_the_collector_off_is_left_as_it_is() -> None:
    gc.freeze()
    frozen = gc.get_freeze_count()
    seen: list[tuple[int, bool]] = []
    RankedColumns.batch_to_results(_answers(seen))
    assert gc.get_freeze_count() == frozen and {s[0] for s in seen} == {frozen}
    gc.unfreeze()
    gc.disable()
    seen.clear()
    RankedColumns.batch_to_results(_answers(seen))
    assert seen == [(0, False)] * 3 and not gc.isenabled() and gc.get_freeze_count() == 0
