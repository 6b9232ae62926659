"""The ``evret`` command line. Each subcommand lives in its own module with an ``add_parser(subparsers)``."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from evret_core.contracts.errors import EvretError
from evret_core.version import __version__


def _command_modules() -> list[str]:
    """Every public module of this package, in the order ``pkgutil.iter_modules`` lists them; each that defines
    ``add_parser`` is one subcommand. (Read here: ``pkgutil`` imports ``inspect`` to name the files, and
    ``inspect`` cost ``evret --help`` more than any command's module.)"""
    import os
    from importlib.machinery import all_suffixes

    suffixes = sorted(all_suffixes(), key=len, reverse=True)  # what inspect.getmodulename tries
    names: list[str] = []
    for folder in __path__:
        for file in sorted(os.listdir(folder)):  # sorted: a package before a module of the same name
            stem = next((file[:-len(s)] for s in suffixes if file.endswith(s)), None)
            if stem is None and "." not in file and os.path.isfile(os.path.join(folder, file, "__init__.py")):
                stem = file
            if stem and "." not in stem and not stem.startswith("_") and stem not in names:
                names.append(stem)
    return [f"{__name__}.{name}" for name in names]


class _Parser(argparse.ArgumentParser):
    """argparse whose "invalid choice" names the likeliest meant choice (subcommands are built with this class
    too)."""

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        if action.choices is not None and value not in action.choices:
            from evret_core.contracts.errors import did_you_mean

            choices = [str(c) for c in action.choices]
            raise argparse.ArgumentError(action, f"invalid choice: {value!r}{did_you_mean(value, choices)} "
                                                 f"(choose from {', '.join(map(repr, choices))})")


def _unrecognized(parser: argparse.ArgumentParser, args: argparse.Namespace, extras: list[str]) -> NoReturn:
    """Report arguments no parser took with the usage of the subcommand they were given to (argparse hands them
    to the top-level parser, whose usage is no help), naming the option an unknown one most likely meant."""
    from evret_core.contracts.errors import did_you_mean

    chosen = parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = action.choices.get(str(getattr(args, "command", "")), parser)
    option = next((e.partition("=")[0] for e in extras if e.startswith("-")), None)
    hint = did_you_mean(option, chosen._option_string_actions) if option else ""
    chosen.error(f"unrecognized arguments: {' '.join(extras)}{hint}")


def _command_of(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` names when nothing but ``--debug`` comes before it, else None (``evret --help``,
    ``evret --version``, no command: every subcommand's parser is needed)."""
    for arg in argv:
        if arg != "--debug":
            return arg if arg.isidentifier() and not arg.startswith("_") else None
    return None


def _one_command_module(command: str) -> Any:
    """The module of this package that defines ``command`` by its name (``plugins_cmd`` or ``plugins``), or None."""
    for name in (f"{__name__}.{command}_cmd", f"{__name__}.{command}"):
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
    return None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``evret`` parser with every subcommand, or with ``command``'s alone when a module of this package is
    named for it (what parsing a command line that names it needs: ``evret plugins`` imports no other command's
    module and builds no other command's options)."""
    parser = _Parser(
        prog="evret", description="Evaluate RAG retrieval against expected answer texts."
    )
    parser.add_argument("--version", action="version", version=f"evret {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="show tracebacks for errors (known secrets masked)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    module = _one_command_module(command) if command else None
    if module is not None and hasattr(module, "add_parser"):
        module.add_parser(sub)
        if list(sub.choices) != [command]:  # a module that defines other commands: build them all
            return build_parser()
    else:
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
    parser = build_parser(_command_of(argv))
    args, extras = parser.parse_known_args(argv)
    if extras:
        _unrecognized(parser, args, extras)
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
        from evret_core.contracts.errors import visible
        from evret_core.io.redact import known_secrets, redact_text

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
