"""The checks the value types (:class:`~evret_core.contracts.retrieve.RetrievalResult`,
:class:`~evret_core.contracts.judge.JudgmentContext`, :class:`~evret_core.contracts.generation.Answer`, ...) run on
what they are given: each returns the value in the field's type, converting what pydantic's lax mode converted
(a numeric string to a float, ``b"x"`` to ``"x"``, a list to a tuple ...), and raises ``TypeError`` for a value of
the wrong type or ``ValueError`` for a bad value, the message naming the field. :func:`value_type` makes such a type,
a frozen dataclass deriving from :class:`Value`."""

from __future__ import annotations

import _thread
import enum
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import FrozenInstanceError, dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

T = TypeVar("T")

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:
    def dataclass_transform(**kwargs: Any) -> Callable[[T], T]:  # what type checkers read; nothing at run time
        return lambda f: f

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


def grade_key(grade: float) -> str:
    """A grade as a histogram key: ``"2"`` for an integral grade, else its decimal form."""
    return str(int(grade)) if grade == int(grade) else repr(grade)


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


class Value:
    """Base of the contracts' frozen value types made with :func:`value_type`: equality, hash, repr and the refusal to
    assign or delete a field, shared by every such type instead of generated for each (Python 3.11's
    ``dataclass`` compiles each generated method with its own ``exec`` when the class is created, and listing
    plugins creates every contracts class). They behave as ``dataclass(frozen=True)`` generates them."""

    __slots__ = ()
    # set by ``value`` on each class: the fields as tuples, in order, for ==/hash and for the repr
    _value_key: ClassVar[Callable[[Any], tuple[Any, ...]]]
    _value_hash_key: ClassVar[Callable[[Any], tuple[Any, ...]]]
    _value_repr: ClassVar[tuple[str, ...]]

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return type(self)._value_key(self) == type(self)._value_key(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(type(self)._value_hash_key(self))

    def __repr__(self) -> str:
        key = (id(self), _thread.get_ident())
        if key in _REPR_RUNNING:  # a value that contains itself, as dataclasses' repr guards it
            return "..."
        _REPR_RUNNING.add(key)
        try:
            shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._value_repr)
        finally:
            _REPR_RUNNING.discard(key)
        return f"{self.__class__.__qualname__}({shown})"

    def __setattr__(self, name: str, value: Any) -> None:
        # the generated __init__ assigns each field once; after it every field is set and refuses another value
        # (a plain subclass of a value type may still set attributes that are not fields, as with dataclasses)
        cls = type(self)
        if name in cls.__dataclass_fields__:  # type: ignore[attr-defined]
            if name in self.__dict__:
                raise FrozenInstanceError(f"cannot assign to field {name!r}")
        elif "__dataclass_fields__" in cls.__dict__:
            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        cls = type(self)
        if "__dataclass_fields__" in cls.__dict__ or name in cls.__dataclass_fields__:  # type: ignore[attr-defined]
            raise FrozenInstanceError(f"cannot delete field {name!r}")
        object.__delattr__(self, name)


_REPR_RUNNING: set[tuple[int, int]] = set()


def _getter(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    """The fields ``names`` of an object as a tuple (``attrgetter`` gives a bare value for one name)."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        one = attrgetter(names[0])
        return lambda obj: (one(obj),)
    return lambda obj: ()


def _value(cls: type[T], kw_only: bool, init: bool) -> type[T]:
    if not issubclass(cls, Value):
        raise TypeError(f"{cls.__qualname__}: a value type derives from Value")
    made = dataclass(cls, init=init, repr=False, eq=False, kw_only=kw_only)
    params = made.__dataclass_params__  # type: ignore[attr-defined]
    # what the class does, though Value does it: a dataclass deriving from it must be frozen, as from any frozen one
    params.repr = params.eq = params.frozen = True
    fields = list(made.__dataclass_fields__.values())  # type: ignore[attr-defined]
    # staticmethod: a lambda (one field) would otherwise bind to the instance
    made._value_key = staticmethod(_getter([f.name for f in fields if f.compare]))
    made._value_hash_key = staticmethod(_getter([f.name for f in fields if (f.compare if f.hash is None else f.hash)]))
    made._value_repr = tuple(f.name for f in fields if f.repr)
    return made


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def value_type(cls: type[T] | None = None, /, *, kw_only: bool = False, init: bool = True) -> Any:
    """``dataclass(frozen=True)`` for a class deriving from :class:`Value`, created without generating equality,
    hash, repr or the frozen ``__setattr__``/``__delattr__`` (they come from :class:`Value`): the same behaviour,
    ``dataclasses.fields``/``replace``/``asdict`` and pickling included, at a third of the creation cost."""
    if cls is None:
        return lambda c: _value(c, kw_only, init)
    return _value(cls, kw_only, init)
