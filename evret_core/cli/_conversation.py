"""The options of the ``full_history`` window and of the rewriter, which ``evret evaluate`` and ``evret rag`` take
alike over conversation datasets."""

from __future__ import annotations

import argparse


def add_history_window_arguments(group: argparse._ArgumentGroup, rewriter_help: str) -> None:
    """``--history-turns``, ``--history-roles``, ``--history-max-words``, ``--rewriter`` (``rewriter_help``) and
    ``--rewriter-option`` on ``group``."""
    group.add_argument("--history-turns", type=int, metavar="N",
                       help="full_history: the N turns before the current one (default: all)")
    group.add_argument("--history-roles", choices=["user", "all"],
                       help="full_history: the user's messages only (default) or the agent's replies too")
    group.add_argument("--history-max-words", type=int, metavar="N",
                       help="full_history: at most N words, the oldest dropped first (default 256)")
    group.add_argument("--rewriter", help=rewriter_help)
    group.add_argument("--rewriter-option", action="append", metavar="KEY=VALUE", help="rewriter option (repeatable)")
