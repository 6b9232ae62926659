"""How the CLI reports failures: an exception that is not an ``EvretError`` (one line naming the plugin whose code
raised, and with ``--debug`` the traceback, in both cases without the secrets the process knows of: the one rule of
:mod:`evret_core.io.redact`), and a finished run that measured nothing (:class:`EndOfRun`: no query retrieved
anything, every judgment or LLM call failed), which exits 2 unless the user opted in."""

from __future__ import annotations

import traceback
from collections.abc import Sequence
from typing import Any

from evret_core.contracts.errors import visible
from evret_core.io.redact import known_secrets, redact_text

__all__ = ["EndOfRun", "add_end_of_run_arguments", "check_unmeasured_flags", "known_secrets", "plugin_failure"]


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


# -- the end of a run: what finished but measured nothing -----------------------------------------------------------
RUN_MEASURED_NOTHING = 2
"""The exit status of a run whose results are written but that measured nothing (see :class:`EndOfRun`)."""

ALLOW_EMPTY = "--allow-empty-retrieval"
ALLOW_UNMEASURED = "--allow-unmeasured"
_SHOWN = 5  # ids and error kinds shown in one line


def add_end_of_run_arguments(p: Any, retrieval: bool = True) -> None:
    """The opt-ins of :class:`EndOfRun` (``evret evaluate`` and ``evret rag``)."""
    if retrieval:
        p.add_argument(ALLOW_EMPTY, action="store_true",
                       help="exit 0 even when no query retrieved anything (a WARNING instead of an error; the "
                            "results are written either way)")
    p.add_argument(ALLOW_UNMEASURED, action="store_true",
                   help="exit 0 even when every judgment or every call of an LLM part failed (a WARNING naming "
                        "the cause instead of an error; the results are written either way)")


class EndOfRun:
    """What a finished run says after its tables, on stderr: a WARNING line for each stage that lost part of its
    work (queries that retrieved nothing, LLM calls that failed, with their kinds and a first message), and an
    error for a stage that did nothing at all (no query retrieved anything; every judgment or every call of an
    LLM part failed). The results are written before; :meth:`report` returns :data:`RUN_MEASURED_NOTHING` after
    the errors unless the user opted in (``--allow-empty-retrieval``, ``--allow-unmeasured``), which turns them
    into WARNING lines."""

    def __init__(self, allow_empty: bool = False, allow_unmeasured: bool = False) -> None:
        self.allow_empty = allow_empty
        self.allow_unmeasured = allow_unmeasured
        self.warnings: list[str] = []
        self.errors: list[str] = []

    def empty_retrieval(self, count: int, total: int, ids: Sequence[str], what: str = "query",
                        plural: str = "queries") -> None:
        """``count`` of ``total`` queries (or ``what``, ``plural``) retrieved nothing; ``ids``: the first of them."""
        from evret_core.evaluation.evaluator import empty_retrieval_message

        if not count or not total:
            return
        message = empty_retrieval_message(count, total, what, plural)
        if count < total:
            self.warnings.append(f"{message} ({_ids(ids, count)})")
        elif self.allow_empty:
            self.warnings.append(message)
        else:
            self.errors.append(f"{message}; pass {ALLOW_EMPTY} to exit 0 on such a run")

    def judgments(self, stats: dict[str, Any], judge: str) -> None:
        """The judgments of ``evret evaluate`` (its results' ``stats``), judged by ``judge`` (its name)."""
        counts = stats.get("judgments") or {}
        total, unmeasured = int(counts.get("unique") or 0), int(counts.get("unmeasured") or 0)
        judge_stats = stats.get("judge")
        if not isinstance(judge_stats, dict):
            judge_stats = {}
        cause = _cause(f"{judge} judge", judge_stats)
        if total and unmeasured == total:
            self._nothing(f"every judgment ({total} of {total}) could not be made: "
                          f"{cause or f'the {judge} judge gave no verdict'}")
        elif cause:
            self.warnings.append(cause)

    def llm_part(self, role: str, stats: dict[str, Any]) -> None:
        """One LLM part of ``evret rag`` (``results.stats["llm"][role]``)."""
        who = {"claim_judge": "claim judge", "relevance": "answer relevance"}.get(role, role)
        total = int(stats.get("structured_calls") or 0)
        reasons = {str(k): int(v) for k, v in (stats.get("unmeasured") or {}).items()}
        errors = {str(k): int(v) for k, v in (stats.get("errors") or {}).items()}
        failed, unmeasured = sum(errors.values()), sum(reasons.values())
        kinds = _kinds(errors, stats.get("error_examples") or {})
        if total and unmeasured >= total:
            if failed >= unmeasured:
                self._nothing(f"{who}: every call ({total} of {total}) failed: {kinds}")
            else:
                examples = stats.get("error_examples") or {}
                others = _kinds({k: v for k, v in reasons.items() if k != "LLM call failed"}, examples)
                self._nothing(f"{who}: no call ({total} of {total}) gave a usable answer: {others}"
                              f"{f'; failed calls: {kinds}' if failed else ''}")
        elif failed:
            self.warnings.append(f"{who}: {failed} of {total} call(s) failed: {kinds}")

    def _nothing(self, message: str) -> None:
        if self.allow_unmeasured:
            self.warnings.append(message)
        else:
            self.errors.append(f"{message}; pass {ALLOW_UNMEASURED} to exit 0 on such a run")

    def report(self, file: Any = None) -> int:
        """Print the WARNING lines, then the errors (``evret: error: ...``, known secrets masked); the exit
        status: :data:`RUN_MEASURED_NOTHING` after an error, else 0."""
        import sys

        out = sys.stderr if file is None else file
        secrets = known_secrets()
        for line in self.warnings:
            print(f"WARNING: {redact_text(line, secrets)}", file=out)
        for line in self.errors:
            print(f"evret: error: {redact_text(line, secrets)}", file=out)
        return RUN_MEASURED_NOTHING if self.errors else 0


def check_unmeasured_flags(allow: bool, fail: bool) -> None:
    """``--allow-unmeasured`` and ``--fail-on-unmeasured`` ask for opposite things."""
    from evret_core.contracts.errors import EvretError

    if allow and fail:
        raise EvretError(f"{ALLOW_UNMEASURED} and --fail-on-unmeasured contradict each other: give one")


def _ids(ids: Sequence[str], count: int) -> str:
    shown = ", ".join(str(i) for i in list(ids)[:_SHOWN])
    return shown + (" ..." if count > _SHOWN else "")


def _kinds(counts: dict[str, int], examples: dict[str, Any]) -> str:
    """``connection 35 (e.g. <first message>)``, most frequent first, a message per kind when known."""
    parts = []
    for kind, n in sorted(counts.items(), key=lambda item: -item[1])[:_SHOWN]:
        example = examples.get(kind)
        parts.append(f"{kind} {n}" + (f" (e.g. {_first_line(str(example))})" if example else ""))
    return "; ".join(parts)


def _cause(who: str, stats: dict[str, Any]) -> str | None:
    """``<who>: N call(s) failed: <kinds>`` from a judge's stats (``errors``, ``error_examples``), or None."""
    errors = {str(k): int(v) for k, v in (stats.get("errors") or {}).items() if isinstance(v, int)}
    if not sum(errors.values()):
        return None
    return f"{who}: {sum(errors.values())} call(s) failed: {_kinds(errors, stats.get('error_examples') or {})}"
