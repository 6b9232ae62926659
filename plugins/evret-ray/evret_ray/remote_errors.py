"""Errors raised on a Ray worker, read on the driver: shared by the executor and the run-file shards."""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from evret_core.sdk import EvretError

__all__ = ["errors_as_evret"]

# a line of a formatted traceback that names the error raised: "package.module.ErrorClass: message"; the last one
# is the error the task ended with, and its message runs to the end of the text (it may span lines)
_RAISED = re.compile(r"^((?:evret_\w+|evret_core)(?:\.\w+)+): ", re.M)


@contextmanager
def errors_as_evret(ray: Any) -> Iterator[None]:
    """A user error raised on a worker (an :class:`EvretError`) reads as it would have here, one raised while the
    worker was being built (an actor's ``__init__``: a judge whose plugin the worker lacks) included."""
    try:
        yield
    except (ray.exceptions.RayTaskError, ray.exceptions.RayActorError) as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, EvretError):
            raise EvretError(str(cause)) from None
        message = _init_error(exc)
        if message is not None:
            raise EvretError(message) from None
        raise


def _init_error(exc: Any) -> str | None:
    """The message of the :class:`EvretError` an actor's creation task raised, which Ray hands back as the text of
    its traceback only (``error_msg``, no ``cause``); None for any other error."""
    if getattr(exc, "cause", None) is not None or not isinstance(getattr(exc, "error_msg", None), str):
        return None
    found = list(_RAISED.finditer(exc.error_msg))
    if not found:
        return None
    path, message = found[-1].group(1), exc.error_msg[found[-1].end():].strip()
    module, _, name = path.rpartition(".")
    try:
        raised = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return None
    return message if isinstance(raised, type) and issubclass(raised, EvretError) and message else None
