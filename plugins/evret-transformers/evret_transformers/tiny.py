"""A tiny random causal LM for tests and benchmarks, built in seconds without a download.

:func:`build_tiny_model` trains a byte-level BPE tokenizer with ``tokenizers`` (every byte is a token) and saves it
with a randomly initialised Llama of the given size under a folder, as ``save_pretrained`` does: the weights are
real (the model runs the code of any Llama) but random, so its free text is noise.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

CORPUS = [
    "You are a strict relevance judge. Answer with exactly one word, YES or NO.",
    "Answer with only a JSON object that matches this JSON schema.",
    '{"verdict": "supported", "claims": ["The queen can lay two thousand eggs a day."], "score": 4}',
    "Query: how many eggs does a queen bee lay? Expected answer: two thousand. Retrieved passage: bees.",
    "The claim is supported by the context. The answer is refused when the context is missing.",
]
CHAT_TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|>\n{% endif %}")


def build_tiny_model(folder: Path, *, chat_template: str | None = None, seed: int = 0, hidden: int = 32,
                     layers: int = 2, corpus: Sequence[str] | None = None, vocab_size: int = 700) -> Path:
    """Save a random Llama (``layers`` layers of width ``hidden``) and its tokenizer (at most ``vocab_size``
    tokens, trained on ``corpus``, default a few sentences) under ``folder``."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<s>", "</s>", "<pad>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    bpe.train_from_iterator(list(corpus) if corpus is not None else CORPUS * 10, trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<s>", eos_token="</s>",  # type: ignore[no-untyped-call]
                                        pad_token="<pad>")
    if chat_template is not None:
        tokenizer.chat_template = chat_template
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=2 * hidden,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=4096, bos_token_id=0, eos_token_id=1, pad_token_id=2)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
