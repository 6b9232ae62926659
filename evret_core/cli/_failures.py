"""How the CLI reports an exception that is not an ``EvretError``: one line naming the plugin whose code raised,
and with ``--debug`` the traceback, in both cases without the secrets the process knows of."""

from __future__ import annotations

import os
import re
import traceback
from collections.abc import Sequence

# names of environment variables and options whose values are secrets
_SECRET_NAME = re.compile(r"(key|token|secret|passw|credential|auth)", re.IGNORECASE)
# shorter values would mask ordinary words and numbers
_MIN_SECRET = 6
_URL_PASSWORD = re.compile(r"://[^/\s:@]*:([^/\s@]+)@")


def known_secrets(argv: Sequence[str], environ: dict[str, str] | None = None) -> list[str]:
    """Values that must never be printed: environment variables and ``KEY=VALUE`` or ``--flag VALUE`` options
    whose name says key, token, secret, password, credential or auth, and passwords written in URLs."""
    env = os.environ if environ is None else environ
    found = [value for name, value in env.items() if _SECRET_NAME.search(name)]
    for i, arg in enumerate(argv):
        name, sep, value = arg.partition("=")
        if sep and _SECRET_NAME.search(name):
            found.append(value)
        elif arg.startswith("--") and _SECRET_NAME.search(arg) and i + 1 < len(argv):
            found.append(argv[i + 1])
        found += _URL_PASSWORD.findall(arg)
    for value in list(env.values()):
        found += _URL_PASSWORD.findall(value)
    # longest first, so that a secret containing another is masked whole
    return sorted({v for v in found if len(v) >= _MIN_SECRET}, key=len, reverse=True)


def redact(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


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
    return redact(text, known_secrets(argv)) + line
