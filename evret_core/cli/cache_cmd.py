"""``evret cache``: inspect or empty the persistent judgment cache."""

from __future__ import annotations

import argparse
import json


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("cache", help="inspect or clear the judgment cache")
    p.add_argument("--cache", metavar="PATH",
                   help="the cache file or folder (default: $EVRET_CACHE_DIR or the user cache folder)")
    actions = p.add_subparsers(dest="cache_command", metavar="ACTION")
    stats = actions.add_parser("stats", help="where the cache is and what it holds")
    stats.add_argument("--json", action="store_true", help="print JSON")
    actions.add_parser("clear", help="delete every cached judgment")
    p.set_defaults(func=run, _parser=p)


def run(args: argparse.Namespace) -> int:
    from evret_core.llm.cache import resolve_cache

    if args.cache_command is None:
        args._parser.print_help()
        return 2
    cache = resolve_cache(args.cache or None)
    assert cache is not None
    try:
        if args.cache_command == "clear":
            removed = cache.clear()
            print(f"removed {removed} judgment(s) from {cache.path}")
            return 0
        info = cache.stats()
    finally:
        cache.close()
    if getattr(args, "json", False):
        print(json.dumps(info, indent=2))
        return 0
    print(f"cache: {info['path']}{'' if info['exists'] else ' (not created yet)'}")
    print(f"judgments: {info['entries']}  size: {info['size_bytes'] / 1024:.1f} KiB")
    for row in info["by_model"]:
        print(f"  {row['judge']:<8} {row['provider'] or '-':<10} {row['model'] or '-':<24} {row['entries']:>8} "
              f"judgments  {row['input_tokens']} in / {row['output_tokens']} out tokens")
    return 0
