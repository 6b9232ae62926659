"""The TREC tokenizer (evret_core.io.trecscan): the compiled scan and the numpy/Python scan give the same
columns and stop at the same line on hostile input (also under the debug allocator and an AddressSanitizer build,
in subprocesses: tests/io/trecscan_hostile.py); the readers give the same runs and the same errors on both paths;
and the bad files of the red-team report (issue 24: joined lines, CR-only line ends, NUL bytes) are errors naming
the file and line."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest

from evret_core import read_qrels, read_run
from evret_core.contracts.errors import EvretError
from evret_core.io import runcolumns, trecscan
from evret_core.io.runcolumns import read_run_columns
from evret_core.metrics.shards import evaluate_run_file
from evret_core.testing.shared_data import skip_or_fail

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("trecscan_hostile.py")
SOURCE = ROOT / "evret_core" / "io" / "_trecscan.c"

_spec = importlib.util.spec_from_file_location("trecscan_hostile", SCRIPT)
assert _spec is not None and _spec.loader is not None
hostile = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(hostile)


def _compiled() -> Any:
    if trecscan._trecscan is None:
        skip_or_fail("the compiled tokenizer evret_core.io._trecscan is not built")
    return trecscan._trecscan


def test_the_compiled_scanner_is_found_where_a_compiler_exists() -> None:
    """Where a C compiler and Python's headers exist, setup.py builds the scanner, and the readers find it under
    the name they import: a build left at another path would fall back to the numpy scan without a word."""
    include = Path(sysconfig.get_paths()["include"])
    if not (shutil.which("gcc") or shutil.which("cc")) or not (include / "Python.h").exists():
        skip_or_fail("no C compiler or Python headers here: the scanner cannot be built")
    assert importlib.util.find_spec("evret_core.io._trecscan") is not None, (
        "evret_core.io._trecscan is not built: pip install -e . (or python setup.py build_ext --inplace)")
    assert trecscan._trecscan is not None and trecscan._trecscan.__name__ == "evret_core.io._trecscan"


def test_compiled_and_python_scans_agree_on_random_hostile_blocks() -> None:
    import random

    fast = _compiled()
    rng = random.Random(7)
    stopped = 0
    for _ in range(400):
        nfields = rng.choice([4, 6])
        stopped += hostile.same(fast, hostile.random_block(rng, nfields), nfields, True)
    assert 50 < stopped < 350  # both clean and bad blocks were tried


def test_lines_at_every_offset_of_the_lexers_chunks_scan_alike() -> None:
    """The compiled scan reads 64-byte chunks as bit masks: every line-end offset, every cut, every odd byte."""
    assert hostile.edges(_compiled()) > 2000


def test_the_dict_scan_merges_a_querys_lines_into_the_dict_given() -> None:
    """read_run/read_qrels hand the scan their dict: a query's lines in two places (or two blocks) go into one
    dict, a document met again there sets ``repeats``, and a value that is not a dict is refused."""
    fast = _compiled()
    into: dict[str, dict[str, float]] = {}
    first = trecscan.Scan(*fast.scan(b"q1 Q0 a 1 2 t\nq2 Q0 a 1 1 t\nq1 Q0 b 2 1.5 t\n", 6, True, into))
    assert first.ids is into and not first.repeats and first.group_qids == ["q1", "q2", "q1"]
    second = trecscan.Scan(*fast.scan(b"q2 Q0 b 2 3 t\n", 6, True, into))
    assert into == {"q1": {"a": 2.0, "b": 1.5}, "q2": {"a": 1.0, "b": 3.0}} and not second.repeats
    assert list(into) == ["q1", "q2"] and list(into["q1"]) == ["a", "b"]
    again = trecscan.Scan(*fast.scan(b"q1 Q0 b 3 0 t\n", 6, True, into))
    assert again.repeats and into["q1"]["b"] == 0.0
    grades: dict[str, dict[str, float]] = {}
    trecscan.Scan(*fast.scan(b"q1 0 a 1\nq1 0 b 1\nq2 0 a 1\n", 4, False, grades))
    assert grades == {"q1": {"a": 1.0, "b": 1.0}, "q2": {"a": 1.0}}
    assert grades["q1"]["a"] is grades["q2"]["a"]  # one float object per value within a call
    with pytest.raises(TypeError, match="is not a dict"):
        fast.scan(b"q1 0 a 1\n", 4, False, {"q1": [1.0]})


def test_the_dict_scan_shares_floats_only_while_scores_repeat() -> None:
    """Scores that repeat (ties, grades) share one float object per value; scores that hardly repeat (a dense
    retriever's) switch the sharing off for the rest of the call (it would cost a lookup per line and save nothing),
    and every value is still read right."""
    fast = _compiled()
    repeating: dict[str, dict[str, float]] = {}
    fast.scan(b"".join(b"q%d Q0 d%d 1 %d t\n" % (i // 100, i, i % 10) for i in range(6000)), 6, True, repeating)
    assert repeating["q0"]["d3"] is repeating["q59"]["d5903"] == 3.0
    distinct: dict[str, dict[str, float]] = {}
    lines = [b"q%d Q0 d%d 1 0.%08d t\n" % (i // 100, i, i * 7919) for i in range(5000)]
    lines += [b"q99 Q0 e%d 1 7.5 t\n" % i for i in range(3)]
    fast.scan(b"".join(lines), 6, True, distinct)
    assert distinct["q7"]["d777"] == float(f"0.{777 * 7919:08d}")
    sevens = list(distinct["q99"].values())
    assert sevens == [7.5] * 3 and sevens[0] is not sevens[1]


@pytest.mark.parametrize("number", hostile.NUMBERS)
def test_scores_are_read_as_float_reads_them(number: str) -> None:
    fast = _compiled()
    line = f"q1 Q0 d1 1 {number} t\n".encode()
    got = trecscan.Scan(*fast.scan(line, 6, True))
    try:
        expected = float(number)
    except ValueError:
        expected = None
    if expected is None or expected != expected:
        assert got.error == (0, 0, len(line) - 1)
    else:
        assert got.error is None
        assert got.values == bytearray(__import__("struct").pack("d", expected))  # bit for bit, -0.0 included


def test_long_decimals_are_read_bit_for_bit_as_float_reads_them() -> None:
    """Decimals past the exact fast path (a float's 17-digit repr, 20 digits, subnormals, halfway cases) are read
    by the C library's correctly rounded strtod_l in the "C" locale, without the GIL: bit for bit as float()."""
    import random
    import struct

    fast = _compiled()
    rng = random.Random(3)
    numbers = ["9007199254740993", "2.2250738585072011e-308", "2.4703282292062327e-324", "2.4703282292062328e-324",
               "1.7976931348623157e308", "1.7976931348623159e308", "0.30000000000000004", "-0." + "9" * 300, "1e23",
               "8.98846567431158e307", "123456789012345678901234567890e-50"]
    for _ in range(20_000):
        x = struct.unpack("d", struct.pack("Q", rng.getrandbits(64)))[0]
        numbers += [repr(x)] if x == x and abs(x) != float("inf") else []
        numbers += [repr(rng.random()), f"{rng.uniform(-1e6, 1e6):.{rng.randint(15, 25)}e}"]
    block = "".join(f"q1 Q0 d{i} 1 {n} t\n" for i, n in enumerate(numbers)).encode()
    got = trecscan.Scan(*fast.scan(block, 6, True))
    assert got.error is None
    assert got.values == bytearray(struct.pack(f"{len(numbers)}d", *map(float, numbers)))


def _run(env_extra: dict[str, str], rounds: int) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **env_extra}
    env.pop("EVRET_PURE_PYTHON", None)
    return subprocess.run([sys.executable, str(SCRIPT), "--rounds", str(rounds)], env=env, capture_output=True,
                          text=True, timeout=600, cwd=ROOT)


def test_hostile_blocks_under_the_debug_allocator() -> None:
    _compiled()
    done = _run({"PYTHONMALLOC": "debug"}, rounds=1500)
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    assert done.stdout.startswith("ok: "), done.stdout


@pytest.mark.parametrize("variant", ["", "-DTRECSCAN_SCALAR", "-DTRECSCAN_NO_LEXER", "-DTRECSCAN_NO_STRTOD_L"])
def test_hostile_blocks_against_an_address_sanitizer_build(variant: str, tmp_path: Path) -> None:
    """The extension as built (SSE2 lexer), its byte-loop masks (what a machine without SSE2 runs), split_line
    alone (a compiler without __builtin_ctzll) and long decimals read by Python's reader with the GIL taken back
    (a C library without strtod_l), each under AddressSanitizer."""
    gcc = shutil.which("gcc")
    runtime = None
    if gcc is not None:
        found = subprocess.run([gcc, "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
        runtime = found if os.path.isabs(found) and os.path.exists(found) else None
    include = Path(sysconfig.get_paths()["include"])
    if runtime is None:
        skip_or_fail("gcc with libasan is not available (gcc -print-file-name=libasan.so found nothing)")
    if not (include / "Python.h").exists():
        skip_or_fail(f"no Python headers at {include}")
    target = tmp_path / f"_trecscan{sysconfig.get_config_var('EXT_SUFFIX')}"
    build = subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-g", "-fsanitize=address", "-fno-omit-frame-pointer",
                            *([variant] if variant else []), f"-I{include}", str(SOURCE), "-o", str(target)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    # PYTHONMALLOC=malloc: pymalloc's arenas would hide small buffers from the sanitizer
    done = _run({"LD_PRELOAD": str(runtime), "ASAN_OPTIONS": "detect_leaks=0", "PYTHONMALLOC": "malloc",
                 "EVRET_TRECSCAN_SO": str(target)}, rounds=1500 if not variant else 500)
    assert "AddressSanitizer" not in done.stderr, done.stderr[-6000:]
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    assert done.stdout.startswith("ok: "), done.stdout


# -- the readers on both paths --------------------------------------------------------------------------------------
RUNS = {
    "joined lines (T16)": "1 Q0 d1 1 2.0 t 1 Q0 d2 2 1.0 t\n",
    "CR-only line ends (T05c)": "q1 Q0 d1 1 2.0 t\rq1 Q0 d2 2 1.0 t\rq2 Q0 d1 1 1 t\r",
    "CRLF": "q1 Q0 d1 1 2.0 t\r\nq1 Q0 d2 2 1.0 t\r\n",
    "a NUL byte": "q1 Q0 d1 1 2.0 t\nq1 Q0 d\x002 2 1.0 t\n",
    "a UTF-16 file": "q1 Q0 d1 1 2.0 t\n",
    "a truncated line": "q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2",
    "trailing fields, as in trec_eval's results.trunc": "q1 Q0 d1 1 2.0 t more junk at\nq1 Q0 d2 2 1 t end\n",
    "a duplicate before a bad line": "q1 Q0 d1 1 2.0 t\nq2 Q0 d1 1 2 t\nq1 Q0 d1 2 1.0 t\nq1 Q0 d3 2 nan t\n",
    "a bad line before a duplicate": "q1 Q0 d1 1 2.0 t\nq1 Q0 d3 2 x t\nq1 Q0 d1 2 1.0 t\n",
    "a duplicate across a block end": "q1 Q0 d1 1 2.0 t\n" + "".join(f"q1 Q0 e{i} 1 1 t\n" for i in range(40))
                                      + "q1 Q0 d1 1 2.0 t\n",
    "unicode spaces": "q1\u00a0Q0 d1\u3000 1 2.0 t\x85\nq1 Q0 d\u20032 1 2 t\n",
    "surrogate bytes": "q1 Q0 d1 1 2.0 t\n",
    "many blocks: a BOM, a line longer than a block, queries across block ends, one not adjacent":
        "\ufeff" + "".join(f"q{i // 7} Q0 d{i} {i} {i / 3!r} t\n" for i in range(60)) + f"q2 Q0 {'x' * 300} 1 1 t\n"
        + "".join(f"q9 Q0 e{i} {i} {-i}e-3 t\n" for i in range(30)) + "q0 Q0 late 1 0.5 t\n",
    "a bad line many blocks on": "".join(f"q{i // 5} Q0 d{i} {i} 1.{i} t\n" for i in range(80)) + "q1 Q0 z 1 x t\n"
        + "".join(f"q{i} Q0 d{i} 1 2 t\n" for i in range(40)),
}
QRELS = {
    "joined lines": "q1 0 d1 1 q1 0 d2 1\n",
    "CR-only line ends": "q1 0 d1 1\rq1 0 d2 1\r",
    "five fields": "q1 0 d1 1 x\n",
    "a duplicate before a bad grade": "q1 0 d1 1\nq1 0 d1 2\nq1 0 d2 x\n",
    "a NUL byte": "q1 0 d1 1\nq1 0\x00 d2 1\n",
}


def _bytes(name: str, text: str) -> bytes:
    if name == "a UTF-16 file":
        return text.encode("utf-16-le")
    if name == "surrogate bytes":
        return text.encode() + b"q1 Q0 d\xed\xa0\x80 1 1 t\n"
    return text.encode()


def _outcome(read: Any, path: Path) -> Any:
    try:
        got = read(path)
    except EvretError as exc:
        return ("error", str(exc))
    return ("ok", getattr(got, "tag", None), [(q, list(d.items())) for q, d in got.items()])


@pytest.mark.parametrize("block", [1 << 23, 64])
@pytest.mark.parametrize("name", list(RUNS))
def test_run_readers_give_the_same_outcome_on_both_paths(name: str, block: int, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runcolumns, "_BLOCK", block)
    path = tmp_path / "run.trec"
    path.write_bytes(_bytes(name, RUNS[name]))
    outcomes = []
    for pure in ("1", "0"):
        monkeypatch.setenv("EVRET_PURE_PYTHON", pure)
        outcomes += [_outcome(read_run, path), _outcome(read_run_columns, path),  # and blocks scanned side by side:
                     _outcome(lambda p: read_run_columns(p, threads=3), path), _outcome(lambda p: read_run(p, threads=2), path)]
    assert all(o == outcomes[0] for o in outcomes), outcomes
    kind, *rest = outcomes[0]
    if name.startswith(("trailing", "CRLF", "unicode", "many blocks")):
        assert kind == "ok"
    else:
        assert kind == "error" and str(rest[0]).startswith(f"{path}:"), rest
    messages = {
        "joined lines (T16)": ":1: expected 6 fields (query_id Q0 doc_id rank score run_tag), got 12: two or more "
                              "lines joined (a lost line end?)",
        "CR-only line ends (T05c)": ":1: expected 6 fields (query_id Q0 doc_id rank score run_tag), got 18: lines that "
                                    "end in a carriage return alone (old Mac line ends) read as one",
        "a NUL byte": ":2: a NUL byte at column 8 (a binary or UTF-16 file?)",
        "a UTF-16 file": ":1: a NUL byte at column 2",
        "a duplicate before a bad line": ":3: query q1: document 'd1' is ranked twice (first on line 1)",
        "a bad line before a duplicate": ":2: score 'x' is not a number",
        "a duplicate across a block end": ":42: query q1: document 'd1' is ranked twice (first on line 1)",
        "surrogate bytes": ":2: not UTF-8 text (byte 0xed at column 8)",
        "a bad line many blocks on": ":81: score 'x' is not a number",
    }
    if name in messages:
        assert messages[name] in rest[0]


@pytest.mark.parametrize("name", list(QRELS))
def test_qrels_reader_gives_the_same_outcome_on_both_paths(name: str, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "qrels"
    path.write_bytes(QRELS[name].encode())
    monkeypatch.setattr(runcolumns, "_BLOCK", 16)  # a block or two per line: the threads' blocks straddle lines
    outcomes = []
    for pure in ("1", "0"):
        monkeypatch.setenv("EVRET_PURE_PYTHON", pure)
        outcomes += [_outcome(read_qrels, path), _outcome(lambda p: read_qrels(p, threads=2), path)]
    assert all(o == outcomes[0] for o in outcomes) and outcomes[0][0] == "error", outcomes
    assert outcomes[0][1].startswith(f"{path}:")
    if name == "a duplicate before a bad grade":
        assert outcomes[0][1] == f"{path}:2: query q1: document 'd1' is judged twice"


def test_joined_lines_are_an_error_in_shards_and_in_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """T16/T16b: two lines joined lost the second document (num_ret 1, exit 0); now exit 2 naming the line."""
    from evret_core.cli import main

    (tmp_path / "q").write_text("1 0 d1 1\n1 0 d2 1\n")
    (tmp_path / "r").write_text("1 Q0 d0 1 3.0 t\n1 Q0 d1 1 2.0 t 1 Q0 d2 2 1.0 t\n")
    with pytest.raises(EvretError, match=r"r:2: expected 6 fields .*got 12: two or more lines joined"):
        evaluate_run_file(tmp_path / "q", tmp_path / "r", ["num_ret"], shards=2)
    for extra in ([], ["--shards", "2"]):
        assert main(["trec", str(tmp_path / "q"), str(tmp_path / "r"), "-m", "num_ret", *extra]) == 2
        err = capsys.readouterr().err
        assert "r:2: expected 6 fields" in err and "Traceback" not in err


def test_a_cr_only_run_is_an_error_and_crlf_still_reads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """T05c: a CR-only results.test was read as one line (num_q 1, num_ret 1, exit 0)."""
    from evret_core.cli import main
    from evret_core.testing.shared_data import shared_data

    data = shared_data("datasets", "trec_eval", what="trec_eval's test suite")
    text = (data / "results.test").read_bytes()
    (tmp_path / "cr").write_bytes(text.replace(b"\n", b"\r"))
    (tmp_path / "crlf").write_bytes(text.replace(b"\n", b"\r\n"))
    qrels = str(data / "qrels.test")
    for extra in ([], ["--shards", "2"]):
        assert main(["trec", qrels, str(tmp_path / "cr"), "-m", "num_ret", *extra]) == 2
        assert "cr:1: expected 6 fields" in capsys.readouterr().err
        assert main(["trec", qrels, str(tmp_path / "crlf"), "-m", "num_ret", "--json", *extra]) == 0
        assert '"num_ret": 1500.0' in capsys.readouterr().out


def test_a_joined_first_line_is_still_read_as_a_trec_run(tmp_path: Path) -> None:
    """evret evaluate --run: a run whose first line holds two joined lines was taken for JSON lines (a JSON error);
    now the TREC reader names the line."""
    from evret_core.io.runs import read_retrieved

    path = tmp_path / "run.trec"
    path.write_text("q1 Q0 d1 1 2.0 t q1 Q0 d2 2 1.0 t\nq1 Q0 d3 3 0.5 t\n")
    with pytest.raises(EvretError, match=r"run\.trec:1: expected 6 fields .*got 12: two or more lines joined"):
        read_retrieved(path)
    path.write_text("q1 Q0 d1 1 2.0 t trailing\nq1 Q0 d3 3 0.5 t\n")  # trec_eval's trailing fields: a run
    assert dict(read_retrieved(path)["q1"]) == {"d1": 2.0, "d3": 0.5}
