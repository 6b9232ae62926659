"""Every built-in adversarial family passes the perturbation conformance suite."""

from __future__ import annotations

from evret_core.testing import PerturbationConformance


class TestCounterfactualConformance(PerturbationConformance):
    family = "counterfactual"


class TestInjectionConformance(PerturbationConformance):
    family = "injection"


class TestMissingGoldConformance(PerturbationConformance):
    family = "missing-gold"


class TestIrrelevantOnlyConformance(PerturbationConformance):
    family = "irrelevant-only"


def test_every_built_in_family_has_a_conformance_class() -> None:
    from evret_core.rag.perturb.perturbations import FAMILIES

    tested = {cls.family for cls in list(globals().values())
              if isinstance(cls, type) and issubclass(cls, PerturbationConformance) and cls.family}
    assert tested == set(FAMILIES)
