"""Hook register_generators: the built-in `extractive` generator and a plugin's generator side by side, the
plugin's generator used by name in a RAG run."""

from __future__ import annotations

import pytest

from evret_core import EvretError, hookimpl
from evret_core.plugins.loading import register_plugin
from evret_core.plugins.registry import create_generator, generator_names
from evret_core.rag import Answer, GenerationRequest, Generator, QuestionSet, RagEvaluator


class Parrot(Generator):
    """Answers with its configured word, citing every context."""

    name = "parrot"

    def __init__(self, word: str = "honey") -> None:
        self.word = word

    def generate(self, request: GenerationRequest) -> Answer:
        return Answer(text=self.word)


class Plugin:
    @hookimpl
    def register_generators(self, register):  # type: ignore[no-untyped-def]
        register("parrot", Parrot)


def test_register_generators() -> None:
    register_plugin(Plugin(), name="p")
    assert {"extractive", "parrot"} <= set(generator_names())
    assert create_generator("parrot", word="wax").generate(GenerationRequest("q", "?", (), "gold")).text == "wax"
    questions = QuestionSet.from_records(
        [{"id": "q1", "question": "What do bees make?", "answers": ["wax"], "gold_doc_ids": ["d1"]}],
        corpus={"d1": {"text": "Bees make wax."}},
    )
    results = RagEvaluator(generator="parrot", generator_options={"word": "wax"}, conditions=["gold"],
                           n_resamples=10).evaluate(questions)
    assert results.generation["gold"]["exact"] == 1.0
    assert results.config["generator"] == {"name": "parrot"}


def test_unknown_generator_names_the_known_ones() -> None:
    with pytest.raises(EvretError, match="extractive"):
        create_generator("no-such-generator")
