"""The compiled reader under hostile input, in subprocesses: with CPython's debug allocator, and built with
AddressSanitizer. The attacks themselves live in tests/metrics/fastrank_hostile.py (a script, so that a crash is a
failed exit status here instead of a dead test run)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from evret_core.metrics import engine
from evret_core.testing.shared_data import skip_or_fail

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("fastrank_hostile.py")
SOURCE = ROOT / "evret_core" / "metrics" / "_fastrank.c"


def _run(env_extra: dict[str, str], rounds: int) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **env_extra}
    env.pop("EVRET_PURE_PYTHON", None)
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--rounds", str(rounds)],
        env=env, capture_output=True, text=True, timeout=600, cwd=ROOT,
    )


def test_hostile_inputs_under_the_debug_allocator() -> None:
    if engine._fastrank is None:
        skip_or_fail("the compiled reader evret_core.metrics._fastrank is not built")
    done = _run({"PYTHONMALLOC": "debug"}, rounds=400)
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    assert done.stdout.startswith("ok: "), done.stdout


def _asan_runtime() -> str | None:
    gcc = shutil.which("gcc")
    if gcc is None:
        return None
    found = subprocess.run([gcc, "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    # gcc echoes the bare name back when it has no such library
    return found if os.path.isabs(found) and os.path.exists(found) else None


def test_hostile_inputs_against_an_address_sanitizer_build(tmp_path: Path) -> None:
    runtime = _asan_runtime()
    include = Path(sysconfig.get_paths()["include"])
    if runtime is None:
        skip_or_fail("gcc with libasan is not available (gcc -print-file-name=libasan.so found nothing)")
    if not (include / "Python.h").exists():
        skip_or_fail(f"no Python headers at {include}")
    target = tmp_path / f"_fastrank{sysconfig.get_config_var('EXT_SUFFIX')}"
    build = subprocess.run(
        ["gcc", "-shared", "-fPIC", "-O1", "-g", "-fsanitize=address", "-fno-omit-frame-pointer",
         f"-I{include}", str(SOURCE), "-o", str(target)],
        capture_output=True, text=True,
    )
    assert build.returncode == 0, build.stderr
    # PYTHONMALLOC=malloc: pymalloc's arenas would hide small buffers from the sanitizer
    done = _run({"LD_PRELOAD": str(runtime), "ASAN_OPTIONS": "detect_leaks=0", "PYTHONMALLOC": "malloc",
                 "EVRET_FASTRANK_SO": str(target)}, rounds=200)
    assert "AddressSanitizer" not in done.stderr, done.stderr[-6000:]
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    assert done.stdout.startswith("ok: "), done.stdout
