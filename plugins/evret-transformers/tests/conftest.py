"""A tiny causal LM built in the test session: a byte-level BPE tokenizer trained here with ``tokenizers`` and a
randomly initialised two-layer Llama, saved with ``save_pretrained``. The weights are real (the model runs the
same code as any Llama) but random, so its free text is noise: what constrained decoding must turn into JSON."""

from __future__ import annotations

from pathlib import Path

import pytest

CORPUS = [
    "You are a strict relevance judge. Answer with exactly one word, YES or NO.",
    "Answer with only a JSON object that matches this JSON schema.",
    '{"verdict": "supported", "claims": ["The queen can lay two thousand eggs a day."], "score": 4}',
    "Query: how many eggs does a queen bee lay? Expected answer: two thousand. Retrieved passage: bees.",
    "The claim is supported by the context. The answer is refused when the context is missing.",
]
CHAT_TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|>\n{% endif %}")


def build_tiny_model(folder: Path, *, chat_template: str | None = None, seed: int = 0) -> Path:
    """Save a random two-layer Llama and its tokenizer (every byte is a token) under ``folder``."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=700, special_tokens=["<s>", "</s>", "<pad>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    bpe.train_from_iterator(CORPUS * 10, trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    if chat_template is not None:
        tokenizer.chat_template = chat_template
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                         bos_token_id=0, eos_token_id=1, pad_token_id=2)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


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
