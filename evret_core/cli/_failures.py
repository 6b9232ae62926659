"""How the CLI reports an exception that is not an ``EvretError``: one line naming the plugin whose code raised,
and with ``--debug`` the traceback, in both cases without the secrets the process knows of (the one rule of
:mod:`evret_core.redact`)."""

from __future__ import annotations

import traceback
from collections.abc import Sequence

from evret_core.redact import known_secrets, redact_text

__all__ = ["known_secrets", "plugin_failure"]


def plugin_failure(exc: BaseException, argv: Sequence[str], debug: bool) -> str | None:
    """The lines to print on stderr for ``exc`` when a third-party plugin's code raised it, else None.

    The one line names the plugin, its distribution and the exception type, never the message (a plugin's message
    may hold anything, an API key included); ``debug`` puts the redacted traceback before it.
    """
    from evret_core.plugins import get_registry

    info = get_registry().plugin_of(exc.__traceback__)
    if info is None:
        return None
    dist = info.distribution or info.name
    where = f"plugin {info.name!r} (distribution {dist}{' ' + info.version if info.version else ''})"
    line = f"evret: error: {where} failed: {type(exc).__name__}"
    if isinstance(exc, SystemExit):  # called outside the guarded stages: the same line as inside them
        from evret_core.plugins import exit_as_error

        line = f"evret: error: {exit_as_error(exc)}"
        return line if not debug else redact("".join(traceback.format_exception(exc)), known_secrets(argv)) + line
    if not debug:
        return f"{line} (run with --debug for the traceback)"
    text = "".join(traceback.format_exception(exc))
    return redact_text(text, known_secrets(argv)) + line
