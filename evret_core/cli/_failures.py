"""How the CLI reports an exception that is not an ``EvretError``: one line naming the plugin whose code raised,
and with ``--debug`` the traceback, in both cases without the secrets the process knows of (the one rule of
:mod:`evret_core.results.redact`)."""

from __future__ import annotations

import traceback
from collections.abc import Sequence

from evret_core.errors import visible
from evret_core.results.redact import known_secrets, redact_text

__all__ = ["known_secrets", "plugin_failure"]


def plugin_failure(exc: BaseException, argv: Sequence[str], debug: bool) -> str | None:
    """The lines to print on stderr for ``exc`` when a third-party plugin's code raised it, else None.

    The one line names the plugin, its distribution, the exception type and the first line of its message with every
    secret the process knows of masked (a plugin's message may hold an API key); ``debug`` puts the redacted
    traceback before it.
    """
    from evret_core.plugins.loading import get_registry

    info = get_registry().plugin_of(exc.__traceback__)
    if info is None:
        return None
    dist = info.distribution or info.name
    where = f"plugin {info.name!r} (distribution {dist}{' ' + info.version if info.version else ''})"
    line = f"evret: error: {where} failed: {type(exc).__name__}"
    if isinstance(exc, SystemExit):  # called outside the guarded stages: the same line as inside them
        from evret_core.plugins.loading import exit_as_error

        line = f"evret: error: {visible(str(exit_as_error(exc)))}"
        return line if not debug else redact_text("".join(traceback.format_exception(exc)), known_secrets(argv)) + line
    message = visible(_first_line(redact_text(str(exc), known_secrets(argv))))
    if message:
        line = f"{line}: {message}"
    if not debug:
        return f"{line} (run with --debug for the traceback)"
    text = "".join(traceback.format_exception(exc))
    return redact_text(text, known_secrets(argv)) + line


MESSAGE_LIMIT = 300


def _first_line(message: str) -> str:
    """A message's first non-empty line, cut to :data:`MESSAGE_LIMIT` characters: one line on the terminal."""
    first = next((line.strip() for line in message.splitlines() if line.strip()), "")
    return first if len(first) <= MESSAGE_LIMIT else first[:MESSAGE_LIMIT - 3] + "..."
