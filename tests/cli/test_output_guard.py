"""Issue 33, the output guard (red-team groups F4 and F5, 2026-11-28): every command that writes refuses, before any
work, an output that is what the run reads: ``evret report``'s drill-down question set, corpus and RGB file (OG06,
OG06b, OG06c), the judgment cache in use and its SQLite companions (OG07), and a file inside a folder an option
names, such as a vector store's data folder (OG08; the Milvus Lite case end to end is in evret-milvus' tests)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evret_core.cli import main
from evret_core.contracts.errors import EvretError
from evret_core.io.outputs import check_output_folder, check_outputs
from evret_core.llm.cache import JudgmentCache

from .._helpers import one_error
from .._paths import REPO
from .test_guards import GUARDED, files  # noqa: F401  (files: the fixture of the guard's input copies)

RAG_EXAMPLE = REPO / "examples" / "rag"
RGB = [{"id": 0, "query": "Who acquired Instagram?", "answer": ["Facebook", "Meta"], "fakeanswer": "Apple",
        "positive_wrong": ["Apple bought Instagram for $1 billion in 2012."],
        "positive": ["Facebook bought Instagram for $1 billion in 2012."],
        "negative": ["Instagram is a photo-sharing app launched in 2010."]}]


# -- F4: evret report's drill-down inputs ----------------------------------------------------------------------------
@pytest.fixture
def rag_inputs(tmp_path: Path) -> dict[str, Path]:
    """Copies of the RAG example's question set and corpus, an RGB file, and a results file of a run on each."""
    out = {"questions": tmp_path / "q.jsonl", "corpus": tmp_path / "c.jsonl", "rgb": tmp_path / "rgb.json"}
    out["questions"].write_bytes((RAG_EXAMPLE / "questions.jsonl").read_bytes())
    out["corpus"].write_bytes((RAG_EXAMPLE / "corpus.jsonl").read_bytes())
    out["rgb"].write_text("".join(json.dumps(r) + "\n" for r in RGB), encoding="utf-8")
    out["run"], out["rgb_run"] = tmp_path / "rag.json", tmp_path / "rgb_run.json"
    assert main(["rag", "--dataset", str(out["questions"]), "--corpus", str(out["corpus"]), "--generator",
                 "extractive", "--conditions", "gold", "--resamples", "10", "--output", str(out["run"])]) == 0
    assert main(["rag", "--dataset", str(out["rgb"]), "--dataset-format", "rgb", "--generator", "extractive",
                 "--conditions", "gold", "--resamples", "10", "--output", str(out["rgb_run"])]) == 0
    return out


@pytest.mark.parametrize("victim", ["corpus", "questions", "rgb"])
def test_report_refuses_its_drill_down_inputs_as_output(rag_inputs: dict[str, Path], victim: str,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """OG06 (the corpus), OG06b (the question set), OG06c (the RGB file)."""
    if victim == "rgb":
        argv = ["report", str(rag_inputs["rgb_run"]), "--format", "html", "--dataset", str(rag_inputs["rgb"]),
                "--dataset-format", "rgb"]
    else:
        argv = ["report", str(rag_inputs["run"]), "--format", "html", "--dataset", str(rag_inputs["questions"]),
                "--corpus", str(rag_inputs["corpus"])]
    before = rag_inputs[victim].read_bytes()
    capsys.readouterr()
    assert main([*argv, "--output", str(rag_inputs[victim])]) == 2
    assert one_error(capsys) == (f"evret: error: --output {rag_inputs[victim]}: is also an input of this run "
                                 f"({rag_inputs[victim]}); write the output elsewhere")
    assert rag_inputs[victim].read_bytes() == before
    assert main([*argv, "--output", str(rag_inputs["run"].with_suffix(".html"))]) == 0  # elsewhere: written


# -- F5: the judgment cache in use -----------------------------------------------------------------------------------
@pytest.fixture
def live_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``$EVRET_CACHE_DIR/judgments.sqlite3`` holding one paid answer."""
    folder = tmp_path / "cache"
    folder.mkdir()
    monkeypatch.setenv("EVRET_CACHE_DIR", str(folder))
    cache = JudgmentCache(folder / "judgments.sqlite3")
    cache.put("k" * 64, "YES", judge="llm", provider="openai", model="m", input_tokens=10, output_tokens=1)
    cache.close()
    return folder / "judgments.sqlite3"


# every command and option that writes a file (the guard table of issue 24), its output pointed at the cache
WRITERS = [(key, argv) for key, cases in GUARDED.items() if key[1] != "mlflow" for argv, _ in cases[:1]]


@pytest.mark.parametrize("suffix", ["", "-wal", "-shm", "-journal"])
@pytest.mark.parametrize(("key", "argv"), WRITERS, ids=[f"{c}-{o}" for (c, o), _ in WRITERS])
def test_no_command_writes_over_the_judgment_cache(files: dict[str, Path], live_cache: Path,  # noqa: F811
                                                   capsys: pytest.CaptureFixture[str], key: tuple[str, str],
                                                   argv: list[str], suffix: str) -> None:
    """OG07: --output (or --write-cases, -o, --save-threshold) naming the live cache or a companion file."""
    target = f"{live_cache}{suffix}"
    flag = "--" + key[1].replace("_", "-")
    args = [a.format(**files) for a in argv]
    # point the command's own output option at the cache, keep the rest of its command line
    at = args.index(flag) if flag in args else args.index("-o")
    args[at + 1] = target
    before = live_cache.read_bytes()
    capsys.readouterr()
    assert main(args) == 2
    assert one_error(capsys) == (f"evret: error: {flag} {target}: is the judgment cache in use ({target}): every "
                                 f"stored LLM answer would be lost; write the output elsewhere")
    assert live_cache.read_bytes() == before
    cache = JudgmentCache(live_cache)
    assert cache.stats()["entries"] == 1
    cache.close()


def test_a_cache_named_by_an_option_and_its_companions_are_inputs(tmp_path: Path) -> None:
    own = tmp_path / "mine.db"
    cache = JudgmentCache(own)
    cache.put("k" * 64, "NO", judge="llm")
    cache.close()
    for name in (own, Path(f"{own}-wal")):
        with pytest.raises(EvretError, match="write the output elsewhere"):
            check_outputs({"--output": name}, options=[{"cache": str(own)}])


# -- F5: a file inside a folder an option names ----------------------------------------------------------------------
def test_an_output_inside_a_folder_an_option_names_is_refused(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """OG08's rule: a vector store's folder (uri=, persist_directory=, a judge's cache= folder) is read by the run;
    a file in it, at any depth, is not an output. The same file elsewhere is."""
    store = tmp_path / "store.db"
    (store / "collections" / "bees").mkdir(parents=True)
    manifest = store / "collections" / "bees" / "manifest.json"
    manifest.write_text('{"version": 3}', encoding="utf-8")
    base = ["evaluate", "--config", str(REPO / "examples" / "eval.toml"), "--resamples", "10", "--no-progress",
            "--judge-option", f"cache={store}"]
    for output in (manifest, store / "new.json", store / "collections" / "x.json"):
        assert main([*base, "--output", str(output)]) == 2
        assert one_error(capsys) == (f"evret: error: --output {output}: is inside {store}, a folder this run reads "
                                     f"(a dataset or a store named by an option); write the output elsewhere")
    assert manifest.read_text(encoding="utf-8") == '{"version": 3}' and not (store / "new.json").exists()
    with pytest.raises(EvretError, match="is inside .*store.db, a folder this run reads"):
        check_output_folder(store / "mlruns", inputs=[str(store)], option="--mlflow")
    check_outputs({"--output": tmp_path / "elsewhere.json"}, options=[{"uri": str(store)}])  # beside it: fine
    check_outputs({"--output": tmp_path / "x.json"}, options=[{"prefix": "/"}])  # the root is no data folder


def test_rag_and_calibrate_refuse_a_file_inside_an_option_folder(files: dict[str, Path], tmp_path: Path,  # noqa: F811
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "chroma"
    folder.mkdir()
    (folder / "chroma.sqlite3").write_text("x")
    for argv in (["rag", "--dataset", str(RAG_EXAMPLE / "questions.jsonl"), "--corpus",
                  str(RAG_EXAMPLE / "corpus.jsonl"), "--retriever", "bm25", "--retriever-option",
                  f"persist_directory={folder}", "--generator", "extractive"],
                 ["calibrate", "--labels", str(files["labels"]), "--judge", "llm", "--judge-option", f"cache={folder}"],
                 ["generate", "--corpus", str(files["corpus"]), "-n", "2", "--llm-option", f"cache={folder}"]):
        assert main([*argv, "--output", str(folder / "chroma.sqlite3")]) == 2
        assert f"is inside {folder}, a folder this run reads" in one_error(capsys), argv[0]
    assert (folder / "chroma.sqlite3").read_text() == "x"
