"""The ``evret`` parser built for one named command is that command's parser of the whole CLI, and a command line
that names a command builds and imports no other command (what ``evret plugins`` pays at startup)."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from evret_core.cli import _command_of, build_parser


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


COMMANDS = sorted(_subparsers(build_parser()))


@pytest.mark.parametrize("command", COMMANDS)
def test_the_parser_of_one_command_is_that_command_of_the_whole_parser(command: str) -> None:
    whole, alone = build_parser(), build_parser(command)
    assert list(_subparsers(alone)) == [command]
    assert _subparsers(alone)[command].format_help() == _subparsers(whole)[command].format_help()
    assert alone.format_usage() == whole.format_usage()


@pytest.mark.parametrize(("argv", "command"), [
    (["plugins", "--all"], "plugins"),
    (["--debug", "evaluate", "--dataset", "x"], "evaluate"),
    (["--help", "plugins"], None),
    (["-h"], None),
    (["--version"], None),
    (["--debu", "plugins"], None),  # an abbreviation argparse may expand: the whole parser decides
    (["--", "plugins"], None),
    (["_failures"], None),
    ([], None),
])
def test_the_command_a_command_line_names(argv: list[str], command: str | None) -> None:
    assert _command_of(argv) == command


@pytest.mark.parametrize("argv", [["nope"], ["gating"], ["_failures"]])
def test_a_name_that_is_no_command_gets_the_whole_parser_and_its_error(argv: list[str]) -> None:
    # `gating` is a module of evret_core.cli that defines no command: the error lists every command
    parser = build_parser(_command_of(argv))
    assert sorted(_subparsers(parser)) == COMMANDS


def test_evret_plugins_imports_no_other_command() -> None:
    code = ("import io, sys, contextlib; from evret_core.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()): main(['plugins'])\n"
            "print(' '.join(sorted(m for m in sys.modules if m.startswith('evret_core.cli.'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["evret_core.cli.plugins_cmd"]


def test_the_command_modules_are_the_public_modules_pkgutil_lists() -> None:
    import pkgutil

    import evret_core.cli as cli

    listed = [f"{cli.__name__}.{m.name}" for m in pkgutil.iter_modules(cli.__path__) if not m.name.startswith("_")]
    assert cli._command_modules() == listed


def test_evret_help_loads_no_module_that_only_running_a_command_needs() -> None:
    # inspect (pkgutil names files with it), tempfile (the output writer), dataclasses (the contracts' values)
    code = ("import io, sys, contextlib; from evret_core.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    try:\n        main(['--help'])\n    except SystemExit:\n        pass\n"
            "print(' '.join(sorted({'inspect', 'pkgutil', 'tempfile', 'dataclasses'} & set(sys.modules))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == []
