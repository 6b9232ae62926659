"""The conformance suites' guard: a plugin's test class may override fixtures and settings, never drop a suite
test, unless it marks the override ``xfail`` with a reason (the test still runs)."""

from __future__ import annotations

from typing import Any

import pytest

from evret_core.testing import SUITES, InProcessProviderConformance
from evret_core.testing.suite import Conformance

ALL_SUITES = [*SUITES.values(), InProcessProviderConformance]


def a_test_of(suite: type) -> str:
    """The first test the suite states (each has one of its own besides the name check)."""
    return next(name for name in vars(suite) if name.startswith("test_"))


def test_every_suite_is_a_conformance_suite_with_its_kind() -> None:
    assert len(ALL_SUITES) == 14
    for kind, suite in SUITES.items():
        assert issubclass(suite, Conformance) and suite.kind is kind, suite.__name__
    assert InProcessProviderConformance.kind is next(k for k in SUITES if k.name == "llm_provider")


@pytest.mark.parametrize("suite", ALL_SUITES, ids=lambda s: s.__name__)
def test_overriding_a_suite_test_is_refused_naming_it(suite: type) -> None:
    name = a_test_of(suite)
    with pytest.raises(TypeError, match=rf"TestMine overrides or deletes conformance test\(s\) {name}\b"):
        type("TestMine", (suite,), {name: lambda self: None})


@pytest.mark.parametrize("suite", ALL_SUITES, ids=lambda s: s.__name__)
def test_deleting_suite_tests_is_refused_naming_each(suite: type) -> None:
    name = a_test_of(suite)
    with pytest.raises(TypeError) as info:
        type("TestMine", (suite,), {name: None, "test_registered_name_is_the_objects_name": None})
    assert name in str(info.value) and "test_registered_name_is_the_objects_name" in str(info.value)


@pytest.mark.parametrize("suite", ALL_SUITES, ids=lambda s: s.__name__)
def test_an_override_marked_xfail_with_a_reason_is_accepted(suite: type) -> None:
    name = a_test_of(suite)

    @pytest.mark.xfail(reason="the service answers in another order")
    def expected_to_fail(self: Any) -> None:
        raise AssertionError

    accepted = type("TestMine", (suite,), {name: expected_to_fail})
    assert getattr(accepted, name) is expected_to_fail
    with pytest.raises(TypeError, match=name):  # an xfail without a reason says nothing
        type("TestMine", (suite,), {name: pytest.mark.xfail(lambda self: None)})


def test_a_subclass_of_a_subclass_is_guarded_too() -> None:
    class TestFirst(SUITES[next(iter(SUITES))]):  # type: ignore[misc,valid-type]
        pass

    with pytest.raises(TypeError, match="test_has_a_name"):
        type("TestSecond", (TestFirst,), {"test_has_a_name": lambda self: None})


def test_registered_name_must_stay_a_fixture() -> None:
    with pytest.raises(TypeError, match="registered_name is a fixture"):
        type("TestMine", (SUITES[next(k for k in SUITES if k.name == "executor")],), {"registered_name": "ray"})
