"""The base of every conformance suite: the guard that keeps a plugin's test class from dropping a suite test, and
the test that the object under test is named as it is registered.

A plugin's test class subclasses its kind's suite (:data:`evret_core.testing.SUITES`) and overrides fixtures and
settings, never a ``test_*`` method: :meth:`Conformance.__init_subclass__` refuses, at class creation, a class that
replaces a suite test or sets it to None. A test that cannot pass for a stated reason is overridden under
``@pytest.mark.xfail(reason=...)``, which is accepted: the test still runs and its failure is reported as expected.
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from evret_core.contracts.hooks import LazyFactory
from evret_core.contracts.kinds import Kind
from evret_core.plugins.loading import get_registry
from evret_core.plugins.recipes import recipe

NAMED_OTHERWISE: dict[tuple[str, str], str] = {
    # A factory function, not a class: it builds a PrecomputedRetriever named ``precomputed``, a name results files
    # record in their manifests (tests/results/data/retrieval-v2.json), so renaming it would change their bytes.
    ("retriever", "run"): "precomputed",
}
"""(kind, registered name) -> the object's ``name``, for the built-ins named otherwise, each with why."""


def _xfail_reason(test: Any) -> str | None:
    """The reason of an ``xfail`` mark on ``test``, or None without one (or with an empty reason)."""
    for mark in getattr(test, "pytestmark", []):
        if getattr(mark, "name", None) == "xfail" and mark.kwargs.get("reason"):
            return str(mark.kwargs["reason"])
    return None


def registered_name_of(kind: Kind[Any], obj: Any) -> str | None:
    """The name ``obj`` is registered under as a ``kind``: the name it was built by (``create_*``), else a name
    whose registered factory is its class (the one equal to its ``name`` when several are); None when no plugin
    registers its class."""
    made = recipe(obj)
    if made is not None and made.kind == kind.name and made.name is not None:
        return made.name
    registry = get_registry()
    cls = type(obj)
    found = []
    for name in registry.names(kind.name):
        try:
            factory = registry.get(kind.name, name)
        except Exception:  # noqa: BLE001 - a name two plugins register is not this object's
            continue
        if isinstance(factory, LazyFactory):
            if factory.target.rpartition(":")[2] != cls.__name__:
                continue  # import only the targets that may be the class
            factory = factory.load()
        if factory is cls:
            found.append(name)
    own = getattr(obj, "family" if kind.name == "metric" else "name", None)
    return own if own in found else (found[0] if found else None)


class Conformance:
    """The base of the conformance suites. Each suite sets ``kind`` and gives the object under test as the
    ``subject`` fixture; the ``registered_name`` fixture finds the name it is registered under (override it to
    return that name when the lookup cannot find it, or None for an object no plugin registers)."""

    kind: ClassVar[Kind[Any]]
    """The kind of :data:`evret_core.contracts.kinds.KINDS` whose contract the suite states."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        suite_tests = {name for base in cls.__mro__[1:] if issubclass(base, Conformance)
                       for name in vars(base) if name.startswith("test_")}
        dropped = sorted(name for name in suite_tests & set(vars(cls))
                         if vars(cls)[name] is None or _xfail_reason(vars(cls)[name]) is None)
        if dropped:
            raise TypeError(f"{cls.__qualname__} overrides or deletes conformance test(s) {', '.join(dropped)}: "
                            f"override fixtures and settings instead, or mark the override "
                            f"@pytest.mark.xfail(reason=...) to say why the test cannot pass")
        fixture = vars(cls).get("registered_name")
        if fixture is None and "registered_name" in vars(cls) or isinstance(fixture, str):
            raise TypeError(f"{cls.__qualname__}.registered_name is a fixture: define it with @pytest.fixture "
                            f"returning the name (or None)")

    @pytest.fixture
    def subject(self) -> Any:
        raise NotImplementedError("the suite gives the object under test as the `subject` fixture")

    @pytest.fixture
    def registered_name(self, subject: Any) -> str | None:
        return registered_name_of(self.kind, subject)

    def test_registered_name_is_the_objects_name(self, subject: Any, registered_name: str | None) -> None:
        if registered_name is None:
            pytest.skip(f"not registered as a {self.kind.singular}: override the `registered_name` fixture to "
                        f"return the name your plugin registers it under")
        attribute = "family" if self.kind.name == "metric" else "name"
        own = getattr(subject, attribute, None)
        want = NAMED_OTHERWISE.get((self.kind.name, registered_name), registered_name)
        assert own == want, (f"{type(subject).__name__} is registered as {registered_name!r} but its {attribute} is "
                             f"{own!r}: a results file would name it otherwise")
