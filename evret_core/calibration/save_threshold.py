"""Save a calibrated threshold into the ``[judge]`` table of an ``evret evaluate`` TOML config.

The file is edited in place as text, so comments and the other settings are kept: the threshold line of the
``[judge]`` table is replaced (or added under its header), a missing table is appended, and a top-level
``judge = "name"`` becomes a table. The result is parsed back before it is written.
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path
from typing import Any

from evret_core.contracts.errors import EvretError
from evret_core.io.outputs import write_output

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

_HEADER = re.compile(r"^\s*\[\s*([^\]]+?)\s*\]\s*(#.*)?$")


def _key_line(key: str) -> re.Pattern[str]:
    return re.compile(rf"^\s*(\"{re.escape(key)}\"|{re.escape(key)})\s*=")


def save_threshold(path: str | Path, judge: str, option: str, value: float | list[float]) -> str:
    """Set ``[judge] option = value`` in the TOML file at ``path`` (created when missing) for judge ``judge``;
    returns the new text. ``value`` is one threshold, or a list of them (a graded judge's ``thresholds``). A
    ``[judge]`` table naming another judge is an error, not overwritten."""
    values = value if isinstance(value, list) else [value]
    if not values or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                             for v in values):
        raise EvretError(f"--save-threshold: the threshold must be a finite number or a list of them, got {value}")
    path = Path(path)
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise EvretError(f"{path}: --save-threshold writes a regular file; this is a link or not a file")
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise EvretError(f"{path}: invalid TOML: {exc}") from None
    current = data.get("judge")
    if isinstance(current, str):
        current = {"name": current}
    if current is not None and not isinstance(current, dict):
        raise EvretError(f"{path}: option 'judge' must be a name or a table with 'name'")
    if current is not None and current.get("name") != judge:
        raise EvretError(f"{path}: the [judge] table is for {current.get('name')!r}, not {judge!r}; "
                         f"not overwriting it")
    line = f"{option} = {value!r}"
    lines = text.split("\n")
    new_lines = _edit(lines, judge, option, line, has_string_key=isinstance(data.get("judge"), str))
    new_text = "\n".join(new_lines)
    if not new_text.endswith("\n"):
        new_text += "\n"
    check = tomllib.loads(new_text)
    if check.get("judge", {}).get(option) != value or check["judge"].get("name") != judge:  # pragma: no cover
        raise EvretError(f"{path}: could not place {option} in the [judge] table; edit the file by hand")
    write_output(path, new_text)
    return new_text


def _edit(lines: list[str], judge: str, option: str, line: str, has_string_key: bool) -> list[str]:
    out = list(lines)
    if has_string_key:  # judge = "name" at the top level: drop it, a [judge] table is appended below
        first_table = next((i for i, s in enumerate(out) if _HEADER.match(s)), len(out))
        out = [s for i, s in enumerate(out) if not (i < first_table and _key_line("judge").match(s))]
    start = next((i for i, s in enumerate(out) if (m := _HEADER.match(s)) and m.group(1) == "judge"), None)
    if start is None:
        while out and not out[-1].strip():
            out.pop()
        return [*out, *([""] if out else []), "[judge]", f'name = "{judge}"', line]
    end = next((i for i in range(start + 1, len(out)) if _HEADER.match(out[i])), len(out))
    pattern = _key_line(option)
    for i in range(start + 1, end):
        if pattern.match(out[i]):
            out[i] = line
            return out
    return [*out[: start + 1], line, *out[start + 1:]]


def current_threshold(path: str | Path, judge: str, option: str) -> float | None:
    """The threshold ``option`` of judge ``judge`` that the TOML file at ``path`` sets now (None when it sets
    none, names another judge, or cannot be read: :func:`save_threshold` then says why)."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    table = data.get("judge")
    if not isinstance(table, dict) or table.get("name") != judge:
        return None
    value = table.get(option)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def describe(path: str | Path, judge: str, option: str, value: float | list[float],
             kept: bool = False) -> dict[str, Any]:
    """What --save-threshold wrote (``kept``: the file's threshold scored as well as the best, so it stayed)."""
    return {"path": str(path), "judge": judge, "option": option, "value": value, "kept": kept}
