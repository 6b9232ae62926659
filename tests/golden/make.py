"""The golden outputs of the CLI: what ``evret`` prints and writes on the bundled examples, masked where two runs
of the same code differ.

``python tests/golden/make.py`` runs every command of :data:`COMMANDS` (each in a fresh process, from the repository
root, inputs named by relative paths), masks the outputs (:data:`MASKS`, :func:`mask`) and writes them to
``tests/golden/expected/``. ``tests/golden/test_golden.py`` runs the same commands into a temporary folder and
compares the masked bytes with the stored ones, so a restructure that changes any report, results file, terminal
table or plugin listing fails there. Regenerate only for an intended change of an output, and say so in the commit.

The commands use the built-ins and evret-bm25 (``EVRET_LOAD_PLUGINS=evret-bm25``), so other installed plugins
change nothing. The LLM parts talk to :class:`~evret_core.testing.llm_stubs.StubLLMServer`, started in the
command's own process, through the core test kit's ``stub`` provider: the judge stub answers YES when the
retrieved passage holds most words of the expected answer, the RAG stub is :mod:`evret_core.testing.rag_stub`;
both are deterministic. ``inputs/bm25.run`` and ``inputs/example.qrels`` were derived once from the
``evaluate`` results (the top 10 of BM25 with its scores to 4 decimals; grade 1 for the documents token-overlap
matched, 0 for the other documents at ranks 2-3).

Volatile values were found by running everything twice and diffing, not guessed; each is masked by key or by an
exact pattern, never by a looser comparison. ``evret plugins`` outputs keep only the built-in plugins (the
third-party ones listed depend on what the machine has installed). The bootstrap intervals are the compiled
accelerator's (``evret_core.metrics._fastrank``, built by ``pip install -e .``); its numpy fallback adds in
another order, so without it the last digits of some intervals differ.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from evret_core.testing.llm_stubs import StubReply, StubRequest

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
EXPECTED = HERE / "expected"
STUB_URL = "{stub}"  # replaced, in the command's process, by the stub server's OpenAI base URL
OUT = "{out}"  # replaced by the output folder

_STUB_JUDGE = ["--judge", "llm", "--judge-option", "provider=stub", "--judge-option", "model=gpt-stub",
               "--judge-option", f"base_url={STUB_URL}", "--judge-option", "api_key=sk-golden-stub"]
_STUB_PART = ["provider=stub", "model=gpt-stub", f"base_url={STUB_URL}", "api_key=sk-golden-stub"]


def _options(flag: str, values: list[str]) -> list[str]:
    return [x for value in values for x in (flag, value)]


@dataclass(frozen=True)
class Command:
    """One ``evret`` command: its arguments (``{out}`` is the output folder), the files it writes there, the LLM
    stub it needs (``judge``, ``rag`` or None) and the plugins it loads."""

    name: str
    argv: list[str]
    writes: list[str] = field(default_factory=list)
    stub: str | None = None
    plugins: str = "evret-bm25"


_EVAL = ["evaluate", "--config", "examples/eval.toml", "--no-progress"]
_RAG = ["rag", "--config", "examples/rag/rag.toml", "--no-progress"]
_RAG_LLM = [*_RAG, "--generator", "llm", *_options("--generator-option", _STUB_PART), "--claim-judge", "llm",
            *_options("--claim-judge-option", _STUB_PART), "--relevance", "llm",
            *_options("--relevance-option", _STUB_PART), "--answer-judge", "contains", "--adversarial",
            "injection", "--resamples", "200"]

COMMANDS: list[Command] = [
    Command("evaluate", [*_EVAL, "--output", f"{OUT}/evaluate.json"], ["evaluate.json"]),
    Command("evaluate-exact", [*_EVAL, "--judge", "exact", "--output", f"{OUT}/evaluate-exact.json"],
            ["evaluate-exact.json"]),
    Command("evaluate-run", ["evaluate", "--run", "tests/golden/inputs/bm25.run", "--corpus", "examples/corpus.jsonl",
                             "--dataset", "examples/dataset.jsonl", "--metric", "recall@5", "--metric", "ndcg@10",
                             "--metric", "mrr@10", "--no-progress", "--output", f"{OUT}/evaluate-run.json"],
            ["evaluate-run.json"]),
    Command("evaluate-llm", [*_EVAL, *_STUB_JUDGE, "--output", f"{OUT}/evaluate-llm.json"], ["evaluate-llm.json"],
            stub="judge"),
    Command("rag", [*_RAG, "--output", f"{OUT}/rag.json"], ["rag.json"]),
    Command("rag-llm", [*_RAG_LLM, "--output", f"{OUT}/rag-llm.json"], ["rag-llm.json"], stub="rag"),
    Command("report-evaluate-md", ["report", f"{OUT}/evaluate.json"]),
    Command("report-evaluate-latex", ["report", "--format", "latex", f"{OUT}/evaluate.json"]),
    Command("report-evaluate-html", ["report", "--format", "html", "--output", f"{OUT}/report-evaluate.html",
                                     f"{OUT}/evaluate.json"], ["report-evaluate.html"]),
    Command("report-evaluate-two-md", ["report", f"{OUT}/evaluate.json", f"{OUT}/evaluate-exact.json"]),
    Command("report-rag-md", ["report", f"{OUT}/rag-llm.json"]),
    Command("report-rag-latex", ["report", "--format", "latex", f"{OUT}/rag-llm.json"]),
    Command("report-rag-html", ["report", "--format", "html", "--output", f"{OUT}/report-rag.html",
                                f"{OUT}/rag-llm.json"], ["report-rag.html"]),
    Command("compare-evaluate", ["compare", f"{OUT}/evaluate.json", f"{OUT}/evaluate-exact.json"]),
    Command("compare-rag", ["compare", f"{OUT}/rag.json", f"{OUT}/rag-llm.json"]),
    Command("trec", ["trec", "tests/golden/inputs/example.qrels", "tests/golden/inputs/bm25.run"]),
    Command("score", ["score", "examples/outputs.jsonl", "--evaluator", "exact", "--output", f"{OUT}/score.jsonl"],
            ["score.jsonl"]),
    Command("plugins-all", ["plugins", "--all"], plugins=""),
    Command("plugins-all-json", ["plugins", "--json", "--all"], plugins=""),
]


# -- masks ------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Mask:
    """A value that differs between two runs of the same code: ``pattern`` (each group is a value replaced by
    ``<name>``; the rest of the match is kept) and why it differs."""

    name: str
    pattern: str
    why: str

    def apply(self, text: str) -> str:
        def keep_around(match: re.Match[str]) -> str:
            kept, at = [], match.start(0)
            for group in range(1, (match.re.groups or 0) + 1):
                kept += [text[at : match.start(group)], f"<{self.name}>"]
                at = match.end(group)
            return "".join([*kept, text[at : match.end(0)]])

        return re.compile(self.pattern, re.M).sub(keep_around, text)


_Q = '(?:"|&#34;)'  # a JSON quote, as written in results files or escaped in an HTML report

MASKS: list[Mask] = [
    Mask("created_at", rf"{_Q}created_at{_Q}: {_Q}([0-9T:+-]+){_Q}", "when a results file was written"),
    Mask("elapsed_s", rf"{_Q}elapsed_s{_Q}: ([0-9.e+-]+)", "the wall time of a run"),
    Mask("python", rf"{_Q}python{_Q}: {_Q}([^\"&]+){_Q}", "the manifest's Python version: the machine's"),
    Mask("platform", rf"{_Q}platform{_Q}: {_Q}([^\"&]+){_Q}", "the manifest's platform: the machine's"),
    Mask("plugins", rf"{_Q}plugins{_Q}: (\{{[^{{}}]*\}})", "the manifest's installed plugins: the machine's"),
    Mask("port", r"http://127\.0\.0\.1:([0-9]+)/", "the LLM stub server's port, chosen by the system"),
    Mask("relevance_calls",
         rf"{_Q}relevance{_Q}: \{{\n(?: *{_Q}(?:provider|model){_Q}: .*\n){{2}}"
         rf" *{_Q}structured_calls{_Q}: ([0-9]+),\n *{_Q}cache_hits{_Q}: ([0-9]+),",
         "pipelined, the relevance of an answer two conditions share is asked twice: the second ask joins the "
         "first while it is in flight, else it is a cache hit, so these two counters depend on timing (its API "
         "calls do not)"),
]


def mask(text: str, out: Path) -> str:
    """``text`` with the output folder, the repository root and every :data:`MASKS` value replaced by a name."""
    text = text.replace(str(out), "<out>").replace(str(REPO), "<repo>")
    for m in MASKS:
        text = m.apply(text)
    return text


_BLOCK = re.compile(r"^\S.*\n(?:  .*\n)*", re.M)
_JSON_ENTRY = re.compile(r"^  \{\n.*?^  \}", re.M | re.S)


def builtins_only(name: str, text: str) -> str:
    """``evret plugins`` output restricted to the built-in plugins (``evret-core:...``): which third-party plugins
    a machine lists depends on what it has installed."""
    if name == "plugins-all":
        return "".join(b for b in _BLOCK.findall(text) if b.startswith("evret-core:"))
    entries = [e for e in _JSON_ENTRY.findall(text) if '"builtin": true' in e]
    kept = "[\n" + ",\n".join(entries) + "\n]\n"
    assert all(p["builtin"] for p in json.loads(kept)) and text.startswith("[\n"), text[:200]
    return kept


FILTERS: dict[str, Callable[[str, str], str]] = {"plugins-all": builtins_only, "plugins-all-json": builtins_only}


# -- running ----------------------------------------------------------------------------------------------------

def _judge_responder() -> Callable[[StubRequest], StubReply]:
    """YES when the retrieved passage holds at least 60% of the expected answer's words (any fenced alias)."""
    fences = re.compile(r"<(expected|retrieved)-([0-9a-f]+)>\n(.*?)\n</\1-\2>", re.S)
    words = re.compile(r"[a-z0-9]+")

    def respond(request: StubRequest) -> StubReply:
        fields: dict[str, list[str]] = {}
        for kind, _, text in fences.findall(request.prompt):
            fields.setdefault(kind, []).append(text)
        retrieved = set(words.findall(" ".join(fields.get("retrieved", [])).lower()))
        for expected in fields.get("expected", []):
            want = words.findall(expected.lower())
            if want and sum(w in retrieved for w in want) >= 0.6 * len(want):
                return StubReply(text="YES")
        return StubReply(text="NO")

    return respond


def _child(name: str, out: str) -> int:
    """Run one command in this process (with its stub server, when it needs one) and return its exit code."""
    from evret_core.cli import main

    command = next(c for c in COMMANDS if c.name == name)
    argv = [a.replace(OUT, out) for a in command.argv]
    if command.stub is None:
        return main(argv)
    from evret_core.testing.llm_provider import register_stub_provider
    from evret_core.testing.llm_stubs import StubLLMServer
    from evret_core.testing.rag_stub import rag_responder

    responder = _judge_responder() if command.stub == "judge" else rag_responder()
    register_stub_provider()
    with StubLLMServer(responder) as server:
        return main([a.replace(STUB_URL, server.openai_base_url) for a in argv])


def _env(out: Path, plugins: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVRET_")}
    env.update(EVRET_LOAD_PLUGINS=plugins, EVRET_CACHE_DIR=str(out / "cache"), COLUMNS="100", LINES="40",
               NO_COLOR="1", TZ="UTC")
    return env


def run_all(out: Path) -> dict[str, bytes]:
    """Run every command into ``out``; ``{stored file name: masked bytes}`` (``<command>.stdout``, ``.stderr``
    when not empty, ``.exit`` when not 0, and each file the command writes)."""
    outputs: dict[str, bytes] = {}
    for command in COMMANDS:
        done = subprocess.run([sys.executable, str(Path(__file__)), "--child", command.name, str(out)],
                              cwd=REPO, env=_env(out, command.plugins), capture_output=True, timeout=600)
        texts = {f"{command.name}.stdout": done.stdout.decode("utf-8")}
        if done.stderr:
            texts[f"{command.name}.stderr"] = done.stderr.decode("utf-8")
        if done.returncode:
            texts[f"{command.name}.exit"] = f"{done.returncode}\n"
        for written in command.writes:
            texts[written] = (out / written).read_text(encoding="utf-8")
        keep = FILTERS.get(command.name)
        if keep is not None:
            texts[f"{command.name}.stdout"] = keep(command.name, texts[f"{command.name}.stdout"])
        outputs.update({k: mask(v, out).encode("utf-8") for k, v in texts.items()})
    return outputs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", nargs=2, metavar=("COMMAND", "OUT"), help=argparse.SUPPRESS)
    parser.add_argument("--into", type=Path, default=EXPECTED, help="where to write (default: tests/golden/expected)")
    args = parser.parse_args(argv)
    if args.child:
        return _child(*args.child)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="evret-golden-") as tmp:
        outputs = run_all(Path(tmp))
    args.into.mkdir(parents=True, exist_ok=True)
    for old in args.into.iterdir():
        old.unlink()
    for name, data in sorted(outputs.items()):
        (args.into / name).write_bytes(data)
    print(f"{len(outputs)} files written to {args.into} in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
