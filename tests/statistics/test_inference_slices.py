"""Slices list their values in natural order: integers numerically (turn indexes 1, 2, 10), other values as
strings."""

from __future__ import annotations

from evret_core.statistics.inference import natural_order, slice_scores


def test_natural_order() -> None:
    assert natural_order(["10", "2", "1"]) == ["1", "2", "10"]
    assert natural_order(["b", "10", "2"]) == ["10", "2", "b"]
    assert natural_order([]) == []


def test_slice_values_sort_numerically_when_all_are_integers() -> None:
    tags = [{"turn": "10"}, {"turn": "2"}, {"turn": "1"}, {"turn": "2"}, {"domain": "b"}, {"domain": "a"}]
    slices = slice_scores({"m": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]}, tags, n_resamples=10)
    assert list(slices["turn"]) == ["1", "2", "10"]
    assert list(slices["domain"]) == ["a", "b"]
    assert slices["turn"]["2"]["n"] == 2
