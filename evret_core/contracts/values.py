"""The checks the value types (:class:`~evret_core.contracts.retrieve.RetrievalResult`,
:class:`~evret_core.contracts.judge.JudgmentContext`, :class:`~evret_core.contracts.generation.Answer`, ...) run on
what they are given: each returns the value in the field's type, converting what pydantic's lax mode converted
(a numeric string to a float, ``b"x"`` to ``"x"``, a list to a tuple ...), and raises ``TypeError`` for a value of
the wrong type or ``ValueError`` for a bad value, the message naming the field."""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

T = TypeVar("T")

_TRUE = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE = frozenset({"0", "off", "f", "false", "n", "no"})


def _decimal() -> type:
    """``Decimal``, imported on the rare paths that need it (``decimal`` costs more to import than this module)."""
    from decimal import Decimal

    return Decimal


def _what(value: Any) -> str:
    return type(value).__name__


def as_str(value: Any, field: str, numbers: bool = False) -> str:
    """``value`` as a ``str``: a string (a ``str`` enum gives its value), UTF-8 bytes, and with ``numbers`` an
    ``int``, ``float`` or ``Decimal`` (never a ``bool``) written out."""
    if type(value) is str:
        return value
    if isinstance(value, enum.Enum) and isinstance(value.value, str):
        return value.value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"{field}: bytes that are not UTF-8") from None
    if numbers and isinstance(value, (int, float, _decimal())) and not isinstance(value, bool):
        return str(value)
    raise TypeError(f"{field}: expected a string, got {_what(value)}")


def as_float(value: Any, field: str) -> float:
    """``value`` as a ``float``: a real number (``bool`` and numpy scalars included), or a string or bytes that
    parse as one."""
    if type(value) is float:
        return value
    if value is None or isinstance(value, (complex, Mapping)) or not hasattr(value, "__float__") and not isinstance(
            value, (str, bytes, bytearray)):
        raise TypeError(f"{field}: expected a number, got {_what(value)}")
    try:
        return float(value.strip() if isinstance(value, (str, bytes, bytearray)) else value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{field}: {value!r} is not a number") from None


def as_int(value: Any, field: str) -> int:
    """``value`` as an ``int``: an integer (``bool`` included), an integral float, or a string that parses as one."""
    if type(value) is int:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, (str, bytes, bytearray)):
        try:
            return int(value.strip())
        except ValueError:
            raise ValueError(f"{field}: {value!r} is not an integer") from None
    if isinstance(value, float):
        raise ValueError(f"{field}: {value!r} is not an integer")
    raise TypeError(f"{field}: expected an integer, got {_what(value)}")


def as_bool(value: Any, field: str) -> bool:
    """``value`` as a ``bool``: a bool (numpy's too), 0 or 1, or a string such as ``"yes"``/``"false"``."""
    if type(value) is bool:
        return value
    if isinstance(value, (str, bytes, bytearray)):
        text = as_str(value, field).strip().lower()
        if text in _TRUE or text in _FALSE:
            return text in _TRUE
        raise ValueError(f"{field}: {value!r} is not a boolean")
    if getattr(getattr(value, "dtype", None), "kind", None) == "b" or isinstance(value, (int, float, _decimal())):
        if value in (0, 1):
            return bool(value)
        raise ValueError(f"{field}: {value!r} is not a boolean")
    raise TypeError(f"{field}: expected a boolean, got {_what(value)}")


def as_dict(value: Any, field: str, numbers: bool = False) -> dict[str, Any]:
    """A new ``dict`` of the mapping ``value``, its keys checked with :func:`as_str`."""
    if not isinstance(value, Mapping):
        raise TypeError(f"{field}: expected a mapping, got {_what(value)}")
    return {k if type(k) is str else as_str(k, f"{field} key", numbers): v for k, v in value.items()}


def items(value: Any, field: str) -> Iterator[Any]:
    """The items of a list-like ``value`` (list, tuple, set, deque, iterator); a string, bytes, a mapping or None
    is refused."""
    if isinstance(value, (str, bytes, bytearray, Mapping)) or not isinstance(value, Iterable):
        raise TypeError(f"{field}: expected a list, got {_what(value)}")
    return iter(value)


def as_list(value: Any, field: str, item: Callable[[Any, str], T]) -> list[T]:
    """A new list of the list-like ``value``'s items, each checked by ``item(value, "field.i")``."""
    return [item(v, f"{field}.{i}") for i, v in enumerate(items(value, field))]


def as_str_list(value: Any, field: str) -> list[str]:
    """A new list of strings (see :func:`as_list`)."""
    if type(value) is list and all(type(v) is str for v in value):
        return list(value)
    return as_list(value, field, as_str)


def as_optional_float(value: Any, field: str) -> float | None:
    """None, or ``value`` as a float (:func:`as_float`)."""
    return None if value is None else as_float(value, field)
