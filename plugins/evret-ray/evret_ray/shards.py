"""Run-file shards on Ray: each task reads its own byte range of the run file and its queries' qrels.

:func:`evret_core.metrics.shards.evaluate_run_file` cuts a TREC run file at query boundaries and asks the executor
to ``map_shards(score_shard, tasks)``; here every shard is one Ray task (1 CPU) given only the file paths and the
byte range, so no worker, and not the driver, holds the whole run: a worker holds one shard's columns and the
judgments of its queries; the driver, the per-query values that come back. At most ``2 x workers`` shards are out
at once, and results are yielded in shard order (the per-query values are then concatenated: exact).

The run and qrels files must be readable at the same path on every node (a shared filesystem, or the files copied
to each node); on a local cluster they are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from evret_ray.remote_errors import errors_as_evret

__all__ = ["map_shards"]


def map_shards(executor: Any, fn: Callable[..., Any], tasks: Sequence[tuple[Any, ...]]) -> Iterator[Any]:
    """``fn(*task)`` for every task as Ray tasks on ``executor``'s cluster, results in task order."""
    ray = executor._ray()

    remote = ray.remote(num_cpus=1, max_retries=1)(fn)
    with errors_as_evret(ray):
        yield from executor._bounded(ray, (remote.remote(*task) for task in tasks))
