"""Output files (evret_core.io.outputs, issue 13 items 6-8): only regular files are replaced, atomically and with the
umask's permissions; symlinks, FIFOs and devices are written through; bad paths fail before any work."""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import pytest

from evret_core.cli import main
from evret_core.contracts.errors import EvretError
from evret_core.io.outputs import check_output_path, write_output

from .._helpers import one_error
from ..cli.test_cli import BASE, env  # noqa: F401  (the fixture)


def test_new_file_follows_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        write_output(tmp_path / "a.txt", "x")
        os.umask(0o077)
        write_output(tmp_path / "b.txt", ["y", "z"])
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a.txt").stat().st_mode) == 0o644  # was 0600 whatever the umask
    assert stat.S_IMODE((tmp_path / "b.txt").stat().st_mode) == 0o600
    assert (tmp_path / "b.txt").read_text() == "yz"


def test_replacing_keeps_the_mode_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "r.json"
    target.write_text("old")
    target.chmod(0o640)
    write_output(target, "new")
    assert target.read_text() == "new" and stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


def test_a_symlink_is_kept_and_its_target_written(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "r.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    check_output_path(link)
    write_output(link, "new")
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == "new"
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "real" / "created.json")
    write_output(dangling, "made")
    assert dangling.is_symlink() and (tmp_path / "real" / "created.json").read_text() == "made"


def test_a_fifo_is_written_through_not_replaced(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[str] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()))
    reader.start()
    check_output_path(fifo)
    write_output(fifo, "through the pipe")
    reader.join(timeout=10)
    assert received == ["through the pipe"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_device_is_written_through(tmp_path: Path) -> None:
    check_output_path("/dev/null")
    write_output("/dev/null", "gone")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_dash_is_standard_output(capsys: pytest.CaptureFixture[str]) -> None:
    check_output_path("-")
    write_output("-", ["a", "b\n"])
    assert capsys.readouterr().out == "ab\n"


@pytest.mark.parametrize("case", ["folder", "missing folder", "file as folder", "input", "empty"])
def test_bad_paths_are_refused_up_front(tmp_path: Path, case: str) -> None:
    (tmp_path / "file").write_text("data")
    path, inputs, message = {
        "folder": (tmp_path, (), "is a folder"),
        "missing folder": (tmp_path / "no" / "r.json", (), "does not exist"),
        "file as folder": (tmp_path / "file" / "r.json", (), "is a file, not a folder"),
        "input": (tmp_path / "file", (str(tmp_path / "file"),), "is also an input"),
        "empty": ("", (), "empty file name"),
    }[case]
    with pytest.raises(EvretError, match=message) as info:
        check_output_path(path, inputs, option="--output")
    assert str(info.value).startswith("--output ")
    assert (tmp_path / "file").read_text() == "data"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_folder_and_file_are_refused(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    (folder / "r.json").write_text("keep")
    folder.chmod(0o500)
    try:
        with pytest.raises(EvretError, match="cannot write in folder"):
            check_output_path(folder / "new.json")
    finally:
        folder.chmod(0o700)
    (folder / "r.json").chmod(0o400)
    with pytest.raises(EvretError, match="read-only"):
        check_output_path(folder / "r.json")


def test_an_input_reached_through_a_symlink_is_refused(tmp_path: Path) -> None:
    (tmp_path / "data.jsonl").write_text("x")
    (tmp_path / "alias.jsonl").symlink_to(tmp_path / "data.jsonl")
    with pytest.raises(EvretError, match="is also an input"):
        check_output_path(tmp_path / "alias.jsonl", [tmp_path / "data.jsonl"])


# -- the commands ----------------------------------------------------------------------------------------------
def test_evaluate_refuses_its_dataset_as_output(env: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    before = (env / "data.jsonl").read_text()
    assert main([*BASE, "--output", "data.jsonl"]) == 2
    assert "--output data.jsonl: is also an input" in one_error(capsys)
    assert (env / "data.jsonl").read_text() == before


def test_evaluate_checks_the_output_before_any_work(
    env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    from evret_core.io.datasets import EvaluationDataset

    def no_work(*args: object, **kwargs: object) -> None:
        raise AssertionError("the dataset was read before the output path was checked")

    monkeypatch.setattr(EvaluationDataset, "load", no_work)
    (env / "out").mkdir()
    assert main([*BASE, "--output", "out"]) == 2
    assert "--output out: is a folder" in one_error(capsys)


def test_evaluate_writes_through_a_symlink_and_a_fifo(env: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    (env / "kept").mkdir()
    (env / "link.json").symlink_to(env / "kept" / "r.json")
    assert main([*BASE, "--output", "link.json"]) == 0
    assert (env / "link.json").is_symlink()
    assert set(json.loads((env / "kept" / "r.json").read_text())["per_query"]) == {"q1", "q2"}
    os.mkfifo(env / "fifo")
    received: list[str] = []
    reader = threading.Thread(target=lambda: received.append((env / "fifo").read_text()))
    reader.start()
    assert main([*BASE, "--output", "fifo"]) == 0
    reader.join(timeout=30)
    assert json.loads(received[0])["metrics"] == ["recall@2", "mrr@2"]
    assert stat.S_ISFIFO(os.lstat(env / "fifo").st_mode)


def test_evaluate_output_dash_is_json_on_stdout(env: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    assert main([*BASE, "--output", "-"]) == 0
    captured = capsys.readouterr()
    assert set(json.loads(captured.out)["per_query"]) == {"q1", "q2"}
    assert "recall@2" in captured.err  # the table moved out of the JSON's way


def test_report_and_score_refuse_their_input_as_output(env: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    assert main([*BASE, "--output", "r.json"]) == 0
    capsys.readouterr()
    before = (env / "r.json").read_text()
    assert main(["report", "r.json", "--output", "r.json"]) == 2
    assert "is also an input" in one_error(capsys)
    assert (env / "r.json").read_text() == before
    (env / "records.jsonl").write_text('{"output": "a", "target": "a"}\n')
    assert main(["score", "records.jsonl", "--evaluator", "exact", "--output", "records.jsonl"]) == 2
    assert "is also an input" in one_error(capsys)
    assert main(["score", "records.jsonl", "--evaluator", "exact", "--output", str(env)]) == 2
    assert "is a folder" in one_error(capsys)


def test_score_output_dash_is_rows_on_stdout(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "records.jsonl").write_text('{"output": "a", "target": "a"}\n{"output": "a", "target": "b"}\n')
    assert main(["score", "records.jsonl", "--evaluator", "exact", "--output", "-"]) == 0
    captured = capsys.readouterr()
    assert [json.loads(line)["score"] for line in captured.out.splitlines()] == [1.0, 0.0]
    assert "exact" in captured.err


def test_a_file_of_a_beir_folder_is_an_input(tmp_path: Path) -> None:
    from evret_core.evaluation.config import EvaluateConfig

    (tmp_path / "beir" / "qrels").mkdir(parents=True)
    for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv"):
        (tmp_path / "beir" / name).write_text("x")
    config = EvaluateConfig(dataset=str(tmp_path / "beir"), retriever="bm25", metrics=["mrr"],
                            output=str(tmp_path / "beir" / "qrels" / "test.tsv"))
    with pytest.raises(EvretError, match="test.tsv: is also an input"):
        config.check_output()
