"""Startup: how long the light commands take in a fresh process, this checkout's code against an earlier one's,
measured in the same run.

The commands are the ones every user and every plugin pays for before any work starts::

    evret --help
    evret plugins
    evret plugins --all
    python -c "import evret_core.sdk"

Each runs in a fresh process (``python -c``, as the ``evret`` console script runs ``evret_core.cli:main``), with
``PYTHONPATH`` pointing at one version's code and plugins; the installed plugins (entry points) are the same for
both. After one untimed run of everything (bytecode, file cache), every round runs each command once per version,
alternating which goes first, so load on a shared machine falls on both alike. Per command it prints the best and
the median wall time of each version, the after/before ratio of the bests and of the medians, the middle half of
the per-round ratios (the noise: a ratio inside it is no change), and the same for the children's CPU time.

The earlier version is a folder holding its code: ``git archive REF`` unpacked (``--ref`` does it in a temporary
folder) or any checkout (``--before``). Startup imports no compiled extension, so none is copied.

    python benchmarks/startup.py --ref main [--repeat 20]
    python benchmarks/startup.py --before /tmp/evret-base [--repeat 20]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI = "import sys; from evret_core.cli import main; sys.argv[0] = 'evret'; sys.exit(main())"
COMMANDS: dict[str, list[str]] = {
    "evret --help": ["-c", CLI, "--help"],
    "evret plugins": ["-c", CLI, "plugins"],
    "evret plugins --all": ["-c", CLI, "plugins", "--all"],
    'python -c "import evret_core.sdk"': ["-c", "import evret_core.sdk"],
}


def environment(code: Path) -> dict[str, str]:
    """The environment that runs ``code``'s evret_core and plugins (checked: an installed copy must not win)."""
    plugins = [str(p) for p in sorted((code / "plugins").glob("*")) if p.is_dir()]
    # PYTHONDONTWRITEBYTECODE off: the warm-up writes bytecode, as an installed package has it; without it every
    # run would compile each module from source and time the compiler
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVRET_") and k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = os.pathsep.join([str(code), *plugins])
    where = subprocess.run([sys.executable, "-c", "import evret_core; print(evret_core.__file__)"], env=env,
                           cwd=code, capture_output=True, text=True, check=True).stdout.strip()
    if not Path(where).resolve().is_relative_to(code.resolve()):
        raise SystemExit(f"evret_core comes from {where}, not from {code}")
    return env


def unpack(ref: str, folder: Path) -> Path:
    """``git archive REF`` unpacked in ``folder``."""
    with tempfile.TemporaryFile() as archive:
        subprocess.run(["git", "archive", ref], cwd=ROOT, stdout=archive, check=True)
        archive.seek(0)
        with tarfile.open(fileobj=archive) as tar:
            tar.extractall(folder, filter="data")
    return folder


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, bytes]:
    """One fresh process: (wall seconds, CPU seconds of the child, its output); fails loudly if it fails."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, *argv], env=env, cwd=cwd, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{argv} failed in {cwd}:\n{done.stderr.decode(errors='replace')[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout


def quartiles(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        return values[0], values[0]
    q = statistics.quantiles(values, n=4)
    return q[0], q[2]


def measure(before: Path, repeat: int) -> None:
    sides = {"before": (before, environment(before)), "after": (ROOT, environment(ROOT))}
    outputs: dict[tuple[str, str], bytes] = {}
    for name, argv in COMMANDS.items():  # warm-up: bytecode written, files cached; outputs kept to compare
        for side, (code, env) in sides.items():
            outputs[(name, side)] = timed(argv, env, code)[2]
    times: dict[tuple[str, str], list[tuple[float, float]]] = {(n, s): [] for n in COMMANDS for s in sides}
    for round_ in range(repeat):
        for name, argv in COMMANDS.items():
            order = list(sides) if round_ % 2 == 0 else list(reversed(sides))
            for side in order:
                code, env = sides[side]
                wall, cpu, _ = timed(argv, env, code)
                times[(name, side)].append((wall, cpu))
    load = os.getloadavg()
    print(f"{repeat} rounds, interleaved; before: {before}; after: {ROOT}; load average {load[0]:.1f} "
          f"{load[1]:.1f} {load[2]:.1f}")
    head = (f"{'command':<36} {'before best/med (s)':>19} {'after best/med (s)':>19} {'best':>6} {'median':>7} "
            f"{'middle half':>13}")
    for column, label in ((0, "wall"), (1, "CPU")):
        print(f"\n{label} time\n{head}")
        for name in COMMANDS:
            b = [t[column] for t in times[(name, "before")]]
            a = [t[column] for t in times[(name, "after")]]
            ratios = [x / y for x, y in zip(a, b, strict=True) if y > 0]
            low, high = quartiles(ratios)
            mid_b, mid_a = statistics.median(b), statistics.median(a)
            print(f"{name:<36} {min(b):>8.3f} /{mid_b:>7.3f}   {min(a):>8.3f} /{mid_a:>7.3f}   "
                  f"{min(a) / min(b):>5.2f}x {mid_a / mid_b:>6.2f}x  {low:>5.2f}-{high:.2f}x")
    differ = [name for name in COMMANDS if outputs[(name, "before")] != outputs[(name, "after")]]
    if differ:
        print(f"\noutput differs between the versions: {', '.join(differ)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--before", type=Path, help="a folder holding the earlier version's code (git archive)")
    where.add_argument("--ref", help="a git ref: its `git archive` is unpacked in a temporary folder")
    parser.add_argument("--repeat", type=int, default=20, help="rounds (default 20)")
    args = parser.parse_args(argv)
    if args.before is not None:
        measure(args.before.resolve(), args.repeat)
        return 0
    with tempfile.TemporaryDirectory(prefix="evret-startup-") as tmp:
        measure(unpack(args.ref, Path(tmp)), args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
