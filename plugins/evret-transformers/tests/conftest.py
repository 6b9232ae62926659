"""Tiny causal LMs built in the test session (:func:`evret_transformers.tiny.build_tiny_model`): random weights,
so their free text is noise, which is what constrained decoding must turn into JSON."""

from __future__ import annotations

from pathlib import Path

import pytest
from evret_transformers.tiny import CHAT_TEMPLATE, build_tiny_model


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "real_model: runs a packaged real model (SmolLM2, Gemma 3): tens of seconds")


@pytest.fixture(scope="session", autouse=True)
def _one_thread() -> None:
    import torch

    torch.set_num_threads(1)  # a tiny model gains nothing from more, and the test machine is shared


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny model whose tokenizer has no chat template (the provider's plain prompt format)."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny-plain"))


@pytest.fixture(scope="session")
def tiny_chat_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same kind of model with a chat template."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny-chat"), chat_template=CHAT_TEMPLATE, seed=1)
