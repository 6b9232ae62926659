"""Errors a user can cause, with messages a person can act on."""

from __future__ import annotations


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
