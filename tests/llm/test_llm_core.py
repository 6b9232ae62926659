"""LLM judging pieces that need no provider plugin: parsing, fences, Retry-After, the cache, the plugin hint."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from evret_core.contracts.errors import EvretError, UnknownNameError
from evret_core.judge.llm import LLMJudge, parse_answer
from evret_core.llm.cache import JudgmentCache, judgment_key, resolve_cache
from evret_core.llm.fencing import fence
from evret_core.llm.providers import parse_retry_after
from evret_core.plugins.loading import reset_registry


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("EVRET_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("YES", (True, "direct")), ("yes.", (True, "direct")), ('"Yes" - it matches', (True, "direct")),
        ("NO", (False, "direct")), ("No, it does not.", (False, "direct")), ("**NO**", (False, "direct")),
        ("Nope", (False, "unparseable")), ("The passage is relevant.", (True, "keyword")),
        ("It is not relevant.", (False, "keyword")), ("NOT a match", (False, "keyword")),
        ("Maybe.", (False, "unparseable")), ("", (False, "unparseable")),
    ],
)
def test_parse_answer(answer: str, expected: tuple[bool, str]) -> None:
    assert parse_answer(answer) == expected


def test_fence_strips_lookalike_tags_so_the_text_cannot_close_it() -> None:
    text = "a </retrieved-deadbeef> b < RETRIEVED-x > c <expected> d </query-1>"
    fenced = fence("retrieved", text, "0123abcd", ("query", "expected"))
    assert fenced.startswith("<retrieved-0123abcd>\n") and fenced.endswith("\n</retrieved-0123abcd>")
    inner = fenced[len("<retrieved-0123abcd>\n"): -len("\n</retrieved-0123abcd>")]
    assert "<" not in inner and inner.split() == ["a", "b", "c", "d"]


def test_parse_retry_after_forms() -> None:
    assert parse_retry_after({"retry-after": "2"}) == 2.0
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    assert parse_retry_after({}) is None and parse_retry_after(None) is None


def test_missing_provider_plugin_names_the_distribution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVRET_LOAD_PLUGINS", "")  # as if no provider plugin were installed
    reset_registry()
    try:
        for provider, dist in (("anthropic", "evret-anthropic"), ("google", "evret-google-genai"),
                               ("openai", "evret-openai")):
            # installed but not loaded: the registry says so (no "pip install" of what is installed)
            with pytest.raises(UnknownNameError, match=f"needs the {dist} plugin .*Plugin '{dist}' is installed but "
                                                       f"not in EVRET_LOAD_PLUGINS"):
                LLMJudge(provider=provider)
    finally:
        reset_registry()


def _null_provider() -> object:
    from evret_core.contracts.provider import LLMProvider

    class NeverCalled(LLMProvider):  # option validation only: no call is ever made
        name = "never"

        async def acomplete(self, messages, *, temperature=0.0, max_tokens=None):  # type: ignore[no-untyped-def]
            raise AssertionError("no call expected")

    return NeverCalled("m")


def test_bad_prompt_template_is_an_error_naming_the_option() -> None:
    with pytest.raises(EvretError, match="prompt_template.*retrieved"):
        LLMJudge(provider=_null_provider(), prompt_template="only {expected}")
    with pytest.raises(EvretError, match="prompt_template"):
        LLMJudge(provider=_null_provider(), prompt_template="{nope} {expected} {retrieved}")




def test_cache_key_covers_every_part() -> None:
    base = dict(judge="llm", provider="openai", model="m", prompt="p", temperature=0.0, query="q", expected="e",
                retrieved="r")
    key = judgment_key(**base)  # type: ignore[arg-type]
    assert key == judgment_key(**base)  # type: ignore[arg-type]
    for part, value in (("judge", "x"), ("provider", "x"), ("model", "x"), ("prompt", "x"), ("temperature", 0.1),
                        ("query", "x"), ("expected", "x"), ("retrieved", "x")):
        assert judgment_key(**{**base, part: value}) != key, part  # type: ignore[arg-type]


def test_cache_location_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_cache(False) is None
    assert resolve_cache(None).path == tmp_path / "cache" / "judgments.sqlite3"  # type: ignore[union-attr]
    (tmp_path / "d").mkdir()
    assert resolve_cache(tmp_path / "d").path == tmp_path / "d" / "judgments.sqlite3"  # type: ignore[union-attr]
    assert resolve_cache(str(tmp_path / "f.db")).path == tmp_path / "f.db"  # type: ignore[union-attr]
    with pytest.raises(EvretError, match="cache"):
        resolve_cache(3.5)


WRITER = """
import sys
from evret_core.llm.cache import JudgmentCache
cache = JudgmentCache(sys.argv[1])
for i in range(int(sys.argv[3])):
    cache.put(f"{sys.argv[2]}-{i}", "YES", judge="llm", provider="p", model="m", input_tokens=3, output_tokens=1)
"""


def test_cache_survives_concurrent_writer_processes(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite3"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), f"w{n}", "150"], stderr=subprocess.PIPE,
                              text=True) for n in range(4)]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    cache = JudgmentCache(path)
    stats = cache.stats()
    assert stats["entries"] == 600
    assert stats["by_model"] == [{"judge": "llm", "provider": "p", "model": "m", "entries": 600,
                                  "input_tokens": 1800, "output_tokens": 600}]
    assert len(cache.get_many([f"w{n}-{i}" for n in range(4) for i in range(150)])) == 600
    assert cache._connect().execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert cache._connect().execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    cache.close()


def test_cache_cli_stats_and_clear(tmp_path: Path) -> None:
    cache = JudgmentCache(tmp_path / "cache" / "judgments.sqlite3")
    cache.put("k1", "YES", judge="llm", provider="openai", model="gpt-4o-mini", input_tokens=10, output_tokens=1)
    cache.close()
    env = {**os.environ, "EVRET_CACHE_DIR": str(tmp_path / "cache")}
    evret = [sys.executable, "-c", "import sys; from evret_core.cli import main; sys.exit(main())"]
    out = subprocess.run([*evret, "cache", "stats"], env=env, capture_output=True, text=True, check=True).stdout
    assert "judgments: 1" in out and "gpt-4o-mini" in out
    out = subprocess.run([*evret, "cache", "clear"], env=env, capture_output=True, text=True, check=True).stdout
    assert "removed 1 judgment" in out
    out = subprocess.run([*evret, "cache", "--cache", str(tmp_path / "cache"), "stats", "--json"], env=env,
                         capture_output=True, text=True, check=True).stdout
    assert '"entries": 0' in out
