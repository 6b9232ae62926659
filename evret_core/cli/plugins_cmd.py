"""``evret plugins``: what is installed, what each plugin registers, and what failed to load."""

from __future__ import annotations

import argparse
import json


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("plugins", help="list installed plugins and what they register")
    p.add_argument("--all", action="store_true", help="include the built-in plugins")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from evret_core.contracts.kinds import BY_NAME
    from evret_core.plugins.loading import list_plugins

    plugins = [p for p in list_plugins() if args.all or not p.builtin]
    if args.json:
        print(json.dumps([p.to_dict() for p in plugins], indent=2))
        return 0
    if not plugins:
        print("No third-party plugins installed (evret plugins --all also lists the built-ins).")
        return 0
    for info in plugins:
        header = f"{info.name} {info.version or ''}".rstrip()
        print(header)
        for kind, names in sorted(info.registers.items()):
            # each kind is labelled as the table of kinds names it (``evaluator`` is "output evaluators")
            label = BY_NAME[kind].label if kind in BY_NAME else kind.replace("_", " ") + "s"
            print(f"  {label}: {', '.join(names)}")
        other = [h for h in info.hooks if not h.startswith("register_")]
        if other:
            print(f"  hooks: {', '.join(other)}")
        if info.skipped:
            print(f"  skipped: {info.skipped}")
        if info.error:
            print(f"  ERROR: {info.error}")
    return 0
