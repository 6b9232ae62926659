"""A tiny random causal LM for tests and benchmarks, built in seconds without a download.

:func:`build_tiny_model` trains a byte-level BPE tokenizer with ``tokenizers`` (every byte is a token) and saves it
with a randomly initialised Llama of the given size under a folder, as ``save_pretrained`` does: the weights are
real (the model runs the code of any Llama) but random, so its free text is noise. :func:`build_tiny_gguf` writes
such a model as a GGUF file (float32 tensors, the byte-level BPE as a ``gpt2`` tokenizer, llama.cpp's layout),
which transformers reads back into the same weights; it needs the ``gguf`` package.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

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


def build_tiny_gguf(path: Path, folder: Path) -> Path:
    """Write the model saved in ``folder`` (by :func:`build_tiny_model`) as the GGUF file ``path``."""
    import json

    import gguf
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(folder)
    weights = {k: v.detach().numpy() for k, v in AutoModelForCausalLM.from_pretrained(folder).state_dict().items()}
    data = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    tokens = [""] * len(data["model"]["vocab"])
    for text, index in data["model"]["vocab"].items():
        tokens[index] = text
    special = {added["id"] for added in data.get("added_tokens", [])}
    merges = [m if isinstance(m, str) else " ".join(m) for m in data["model"]["merges"]]
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_context_length(config.max_position_embeddings)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_embedding_length(config.hidden_size)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_rope_dimension_count(config.hidden_size // config.num_attention_heads)
    rope = getattr(config, "rope_parameters", None) or {"rope_theta": getattr(config, "rope_theta", 10000.0)}
    writer.add_rope_freq_base(float(rope["rope_theta"]))
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_vocab_size(config.vocab_size)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types([3 if i in special else 1 for i in range(len(tokens))])  # 3: control, 1: normal
    writer.add_token_merges(merges)
    writer.add_bos_token_id(config.bos_token_id)
    writer.add_eos_token_id(config.eos_token_id)
    writer.add_pad_token_id(config.pad_token_id)
    template = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8")).get("chat_template")
    if (folder / "chat_template.jinja").is_file():
        template = (folder / "chat_template.jinja").read_text(encoding="utf-8")
    if template:
        writer.add_chat_template(template)

    def permuted(w: Any, heads: int) -> Any:  # llama.cpp stores q and k rows interleaved per rotary pair
        return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)

    writer.add_tensor("token_embd.weight", weights["model.embed_tokens.weight"])
    for i in range(config.num_hidden_layers):
        layer = f"model.layers.{i}."
        names = {"attn_norm": "input_layernorm", "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
                 "ffn_norm": "post_attention_layernorm", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
                 "ffn_down": "mlp.down_proj"}
        writer.add_tensor(f"blk.{i}.attn_q.weight", permuted(weights[layer + "self_attn.q_proj.weight"],
                                                             config.num_attention_heads))
        writer.add_tensor(f"blk.{i}.attn_k.weight", permuted(weights[layer + "self_attn.k_proj.weight"],
                                                             config.num_key_value_heads))
        for short, long in names.items():
            writer.add_tensor(f"blk.{i}.{short}.weight", weights[f"{layer}{long}.weight"])
    writer.add_tensor("output_norm.weight", weights["model.norm.weight"])
    writer.add_tensor("output.weight", weights["lm_head.weight"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
