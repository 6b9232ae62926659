"""Device choice, batch size per device, fp16, and what the results' manifest records (issue 26, part 2).

These run on whatever this machine has: the expected device is read from torch's own availability functions,
not assumed. The GPU figures in docs/semantic.md were measured on an H100 by issue 26's author.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from evret_sentence_transformers import DenseRetriever, Encoder, SemanticJudge
from evret_sentence_transformers.devices import BATCH_SIZES, default_batch_size, device_option, resolve_device

from evret_core import EvaluationDataset, Evaluator, EvretError, QueryExample


def torch_choice() -> str:
    import torch

    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    return "mps" if mps is not None and mps.is_available() else "cpu"


def test_auto_picks_cuda_then_mps_then_cpu_as_torch_reports_them() -> None:
    assert resolve_device("auto") == torch_choice()
    assert device_option(None) == device_option("") == device_option(" Auto ") == "auto"
    encoder = Encoder()  # the default is auto
    assert encoder.device_option == "auto"
    assert encoder.device == torch_choice()


def test_an_explicit_device_is_kept_or_refused_clearly() -> None:
    import torch

    assert resolve_device("cpu") == "cpu"
    if not torch.cuda.is_available():
        with pytest.raises(EvretError, match=r"semantic judge: device 'cuda:1': CUDA is not available"):
            resolve_device("cuda:1", what="semantic judge")
    with pytest.raises(EvretError, match="device 'tpu9'"):
        resolve_device("tpu9", what="dense retriever")


def test_batch_size_is_chosen_for_the_device_unless_given() -> None:
    assert default_batch_size("cuda") == default_batch_size("cuda:1") == BATCH_SIZES["cuda"] == 512
    assert default_batch_size("cpu") == default_batch_size("mps") == 64
    assert Encoder(device="cpu").batch_size == 64
    assert Encoder(device="cpu", batch_size=16).batch_size == 16
    assert Encoder(device="cpu", batch_size="auto").batch_size == 64  # type: ignore[arg-type]
    assert Encoder().batch_size == default_batch_size(torch_choice())
    with pytest.raises(EvretError, match="batch_size must be >= 1"):
        Encoder(batch_size=0)


def test_fp16_off_cuda_is_refused_with_a_clear_message() -> None:
    # an explicit CPU or MPS device: refused when the judge is built, before torch is even imported
    for device in ("cpu", "mps"):
        with pytest.raises(EvretError, match=f"semantic judge: fp16=true runs on CUDA only, and device is '{device}'"):
            SemanticJudge(device=device, fp16=True)
    with pytest.raises(EvretError, match="fp16 must be true or false"):
        SemanticJudge(fp16="sometimes")  # type: ignore[arg-type]
    # auto: decided when the device is resolved (the first encode), still before any text is encoded
    judge = SemanticJudge(fp16="true")  # type: ignore[arg-type]
    if torch_choice() != "cuda":
        with pytest.raises(EvretError, match="fp16=true runs on CUDA only, and device 'auto' resolved to"):
            judge.batch_judge([QueryExample(query_id="q", query_text="q", expected_answers=["alpha beta"])
                               .judgment_context(0, "An alpha gamma. Delta.")])
        assert judge.encoder.texts_encoded == 0


def test_fp16_embeddings_are_cached_apart_from_float32() -> None:
    plain = Encoder(device="cuda")
    half = Encoder(device="cuda", fp16=True)  # constructing needs no GPU: nothing is resolved yet
    assert half.model_key == plain.model_key + ":fp16"
    assert half.settings() == {"device": "cuda", "batch_size": "auto", "fp16": True}


def test_the_manifest_records_the_device_and_batch_size_used(loaded_judge: SemanticJudge) -> None:
    queries = [QueryExample(query_id="q1", query_text="Where is the tower?", expected_answers=["in Paris, France"])]
    run = {"q1": [{"doc_id": "d1", "text": "The Eiffel Tower stands in Paris. It is tall."},
                  {"doc_id": "d2", "text": "Photosynthesis converts sunlight into energy."}]}
    judge = SemanticJudge(threshold=0.8)
    assert judge.config()["device"] == "auto" and judge.config()["batch_size"] == "auto"  # nothing resolved yet
    results = Evaluator(run, metrics=["recall@2"], judge=judge).evaluate(EvaluationDataset(queries=queries))
    assert results.manifest is not None
    recorded = results.manifest.judge
    assert isinstance(recorded, dict)
    assert recorded["device"] == torch_choice()
    assert recorded["batch_size"] == default_batch_size(torch_choice())
    assert recorded["fp16"] is False
    assert results.stats["judge"]["device"] == torch_choice()


def test_the_dense_retriever_records_its_device(loaded_judge: SemanticJudge) -> None:
    queries = [QueryExample(query_id="q1", query_text="alpha?", expected_answers=["alpha"])]
    retriever = DenseRetriever(dataset=EvaluationDataset(queries=queries, corpus={"d1": {"text": "alpha"}}),
                               batch_size=8, save_embeddings=False)
    retriever.retrieve("alpha", k=1)
    assert retriever.config()["device"] == torch_choice()
    assert retriever.config()["batch_size"] == 8


def test_loading_the_model_draws_no_third_party_progress_bar() -> None:
    """transformers drew "Loading weights: 0%| | 0/103" on stderr at load (issue 24, problem 17); its bars are
    hushed for the load only, and its own hook is put back afterwards."""
    code = (
        "from evret_sentence_transformers import Encoder\n"
        "from transformers.utils import logging as hf_logging\n"
        "Encoder(device='cpu').load()\n"
        "print('hook after load:', hf_logging.set_tqdm_hook(None))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "Loading weights" not in done.stderr
    assert "it/s" not in done.stderr
    assert "hook after load: None" in done.stdout
