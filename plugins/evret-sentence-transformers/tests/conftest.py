"""Shared fixtures: one judge (and so one loaded model) per test session, since loading torch takes seconds."""

from __future__ import annotations

import pytest
from evret_sentence_transformers import SemanticJudge

PARAPHRASES = [
    ("The Eiffel Tower is located in Paris.", "The Eiffel Tower stands in Paris, France."),
    ("Water boils at 100 degrees Celsius at sea level.", "At sea level, water boils at 100 °C."),
    ("Aspirin reduces the risk of heart attacks.", "Taking aspirin lowers heart attack risk."),
    ("The capital of Japan is Tokyo.", "Tokyo is the capital city of Japan."),
]
UNRELATED = [
    ("The Eiffel Tower is located in Paris.", "Photosynthesis converts sunlight into chemical energy."),
    ("Water boils at 100 degrees Celsius at sea level.", "The stock market fell sharply on Monday."),
    ("Aspirin reduces the risk of heart attacks.", "Football is popular in Brazil."),
]


@pytest.fixture
def paraphrases() -> list[tuple[str, str]]:
    return list(PARAPHRASES)


@pytest.fixture
def unrelated() -> list[tuple[str, str]]:
    return list(UNRELATED)


@pytest.fixture(scope="session")
def loaded_judge() -> SemanticJudge:
    """A judge with its model loaded; tests that count encodes build their own judge on the same model. Its
    threshold is 0.75, where these sentence paraphrases match: the default is tuned for answers in passages."""
    judge = SemanticJudge(threshold=0.75)
    judge.encoder.load()
    return judge


class EncodeCounter:
    """Wraps a model's ``encode`` to count the texts actually passed to the model."""

    def __init__(self, model: object, monkeypatch: pytest.MonkeyPatch) -> None:
        self.texts: list[str] = []
        original = model.encode  # type: ignore[attr-defined]

        def counting_encode(texts, *args, **kwargs):  # type: ignore[no-untyped-def]
            self.texts.extend([texts] if isinstance(texts, str) else list(texts))
            return original(texts, *args, **kwargs)

        monkeypatch.setattr(model, "encode", counting_encode)


@pytest.fixture
def count_encodes(loaded_judge: SemanticJudge, monkeypatch: pytest.MonkeyPatch) -> EncodeCounter:
    """Counts every text the shared default model encodes during one test."""
    return EncodeCounter(loaded_judge.encoder.model, monkeypatch)
