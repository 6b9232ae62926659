"""Errors raised on a Ray worker, read on the driver: shared by the executor and the run-file shards."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from evret_core.sdk import EvretError

__all__ = ["errors_as_evret"]


@contextmanager
def errors_as_evret(ray: Any) -> Iterator[None]:
    """A user error raised on a worker (an :class:`EvretError`) reads as it would have here."""
    try:
        yield
    except (ray.exceptions.RayTaskError, ray.exceptions.RayActorError) as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, EvretError):
            raise EvretError(str(cause)) from None
        raise
