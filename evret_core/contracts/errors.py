"""Errors a user can cause, with messages a person can act on."""

from __future__ import annotations

from collections.abc import Iterable


class EvretError(Exception):
    """A problem with the user's input or configuration.

    The CLI prints the message without a traceback and exits with status 2. Messages name the file, line,
    field or option at fault.
    """


class PluginError(EvretError):
    """A plugin could not be loaded, or two plugins claim the same name."""


class UnknownNameError(EvretError, KeyError):
    """A judge, metric, retriever, evaluator or provider name that no installed plugin registers."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


def did_you_mean(name: object, known: Iterable[str]) -> str:
    """`` (did you mean X?)`` naming the one of ``known`` that ``name`` most likely meant (a typo, another case,
    ``_`` for ``-``, the start of one name), else ``""``: the one suggestion helper of every unknown-name error."""
    import difflib

    def key(text: str) -> str:
        return text.lower().replace("_", "").replace("-", "")

    typed = key(str(name))
    by_key: dict[str, str] = {}
    for candidate in known:
        if candidate != name:
            by_key.setdefault(key(candidate), candidate)
    if not typed or not by_key:
        return ""
    meant = by_key.get(typed)
    if meant is None:
        starts = [k for k in by_key if k.startswith(typed)]
        if len(starts) == 1 and len(typed) >= 3:
            meant = by_key[starts[0]]
    if meant is None:
        close = difflib.get_close_matches(typed, list(by_key), n=1)
        meant = by_key[close[0]] if close else None
    return f" (did you mean {meant}?)" if meant is not None else ""


def describe_validation_error(exc: Exception, limit: int = 3, whole: str = "record") -> str:
    """A pydantic ``ValidationError`` as one line: ``field.path: message; ...`` (at most ``limit`` problems;
    ``whole`` names a problem of the whole object)."""
    errors = exc.errors() if hasattr(exc, "errors") else []
    parts = []
    for err in errors[:limit]:
        where = ".".join(str(p) for p in err.get("loc", ())) or whole
        message = str(err.get("msg", "")).removeprefix("Value error, ").replace("\n", " ")
        parts.append(f"{where}: {message}")
    if len(errors) > limit:
        parts.append(f"and {len(errors) - limit} more problem(s)")
    return "; ".join(parts) or str(exc).replace("\n", " ")


# C0 controls, DEL, C1 controls, the bidirectional controls (which reorder what a terminal or an editor shows), the
# line and paragraph separators, and lone surrogates (which cannot be encoded): what text from data must never
# carry raw to a terminal or into a report
_HIDDEN = frozenset([*range(0x00, 0x20), *range(0x7F, 0xA0), 0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F),
                     *range(0x2066, 0x206A), 0x2028, 0x2029])
_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def visible(text: str) -> str:
    """``text`` with every control character (ANSI escapes included), bidirectional override and lone surrogate
    written as a visible escape (``\\x1b``, ``\\u202e``, ``\\n``), so text from data (ids, tags, file contents)
    cannot move the cursor, clear a terminal, retitle it or reorder what is shown. The one rule of every place that
    prints such text: the CLI's error line, terminal tables, Markdown and LaTeX reports."""
    if text.isprintable() and text.isascii():  # the usual case: nothing to look at per character
        return text
    out = []
    for ch in text:
        code = ord(ch)
        if code in _HIDDEN or 0xD800 <= code <= 0xDFFF:
            out.append(_SHORT.get(ch) or (f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"))
        else:
            out.append(ch)
    return "".join(out)
