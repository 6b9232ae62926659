"""The ``evret`` command line. Each subcommand lives in its own module with an ``add_parser(subparsers)``."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from evret_core.errors import EvretError


def _command_modules() -> list[str]:
    """Every module of this package that defines ``add_parser``: one module per subcommand."""
    import pkgutil

    here = __path__
    return [f"{__name__}.{m.name}" for m in pkgutil.iter_modules(here) if not m.name.startswith("_")]


def build_parser() -> argparse.ArgumentParser:
    from evret_core import __version__

    parser = argparse.ArgumentParser(
        prog="evret", description="Evaluate RAG retrieval against expected answer texts."
    )
    parser.add_argument("--version", action="version", version=f"evret {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="show tracebacks for errors (known secrets masked)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in _command_modules():
        module = importlib.import_module(module_name)
        if hasattr(module, "add_parser"):
            module.add_parser(sub)
    for subparser in sub.choices.values():
        # `evret evaluate ... --debug` works as well as `evret --debug evaluate ...`
        if "--debug" not in subparser._option_string_actions:
            subparser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                                   help="show tracebacks for errors")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``evret`` console script; returns the exit status (2 for user errors)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    debug = bool(getattr(args, "debug", False))
    try:
        status = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's last flush
        return status
    except BrokenPipeError:
        return _closed_pipe()
    except EvretError as exc:
        if debug:
            raise
        from evret_core.errors import visible
        from evret_core.results.redact import known_secrets, redact_text

        # one line, whatever the message quotes from data: ids and texts with control characters or ANSI escapes
        # are shown escaped, never sent raw to the terminal
        print(f"evret: error: {visible(redact_text(str(exc), known_secrets(argv)))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("evret: interrupted", file=sys.stderr)
        return 130
    except (Exception, SystemExit) as exc:
        # a plugin's judge, factory or retriever raised (or called sys.exit() while running): one line naming it,
        # with its message's secrets masked; --debug adds the traceback with the known secrets masked. The
        # core's own bugs keep their traceback, and the core's own SystemExit goes through.
        from evret_core.cli._failures import plugin_failure

        report = plugin_failure(exc, argv, debug)
        if report is None:
            raise
        print(report, file=sys.stderr)
        return 2


def _closed_pipe() -> int:
    """The reader of standard output went away (``evret compare ... | head``): stop quietly, as ``cat`` does.

    Standard output is pointed at /dev/null so that the interpreter's last flush does not report the pipe again;
    the status is 141 (128 + SIGPIPE), what a shell shows for a command killed by a closed pipe."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no real file descriptor (captured output): nothing to flush there
        pass
    return 141
