"""Shared fixtures: a clean plugin registry per test, fake installed plugins (dist-info on sys.path), the engine's
reader paths, and real evaluations of the bundled honeybee example."""

from __future__ import annotations

import importlib
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from evret_core.plugins.loading import reset_registry

from ._helpers import FakePlugin, evaluate

if TYPE_CHECKING:
    from evret_core.results.evaluation import EvaluationResults

PLUGIN_ENV = ("EVRET_LOAD_PLUGINS", "EVRET_DISABLE_PLUGINS", "EVRET_STRICT_PLUGINS")


@pytest.fixture(autouse=True)
def clean_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in PLUGIN_ENV:
        monkeypatch.delenv(name, raising=False)
    reset_registry()
    yield
    reset_registry()


@pytest.fixture
def fake_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakePlugin:
    """Install a plugin the way pip would, minus the copying: ``fake_plugin(dist_name, module_source)`` writes
    the module and a ``.dist-info`` with an ``evret`` entry point into a folder put on ``sys.path`` (returned,
    for subprocesses' PYTHONPATH)."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    monkeypatch.syspath_prepend(str(site))
    added: list[str] = []

    def install(dist: str, source: str) -> Path:
        module = dist.replace("-", "_")
        (site / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")
        info = site / f"{module}-0.1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1.0\n", encoding="utf-8")
        (info / "entry_points.txt").write_text(f"[evret]\n{dist} = {module}\n", encoding="utf-8")
        added.append(module)
        importlib.invalidate_caches()
        reset_registry()
        return site

    yield install  # type: ignore[misc]
    for module in added:
        sys.modules.pop(module, None)



class DictReaderSpy:
    """Wraps the compiled dict reader of the metrics engine: forces one of its rank strategies and counts the
    chunks it read and those it declined (handed to the numpy path)."""

    def __init__(self, real: object, scan_limit: int) -> None:
        self.real, self.scan_limit, self.read, self.declined = real, scan_limit, 0, 0

    def rank_chunk(self, runs: object, judged: object) -> object:
        out = self.real.rank_chunk(runs, judged, self.scan_limit)  # type: ignore[attr-defined]
        self.read += out is not None
        self.declined += out is None
        return out

    def rank_lists_chunk(self, lists: object, judged: object) -> object:
        out = self.real.rank_lists_chunk(lists, judged)  # type: ignore[attr-defined]
        self.read += out is not None
        self.declined += out is None
        return out


# compiled reader: scan the run per judged document / sort the run once; numpy path: sort / compare
ENGINE_PATHS = {"compiled-scan": 1 << 40, "compiled-sort": -1, "numpy-sorting": 0, "numpy-comparing": 10**9}


@pytest.fixture(params=list(ENGINE_PATHS))
def engine_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> DictReaderSpy | None:
    """Run a metrics test on each way the engine can rank a dict run; with the compiled reader, returns a spy."""
    from evret_core.metrics import engine

    value = ENGINE_PATHS[request.param]
    if request.param.startswith("numpy"):
        monkeypatch.setenv("EVRET_PURE_PYTHON", "1")
        monkeypatch.setattr(engine, "_SORT_FACTOR", value)
        return None
    if engine._fastrank is None:
        pytest.skip("the compiled accelerator evret_core.metrics._fastrank is not built (no C compiler at install)")
    monkeypatch.delenv("EVRET_PURE_PYTHON", raising=False)
    spy = DictReaderSpy(engine._fastrank, value)
    monkeypatch.setattr(engine, "_fastrank", spy)
    return spy


@pytest.fixture(params=["compiled", "numpy"])
def rankings_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> DictReaderSpy | None:
    """Run a ranked-list test with the compiled list reader (returns a spy) and on the pure numpy path (None)."""
    from evret_core.metrics import engine

    if request.param == "numpy":
        monkeypatch.setenv("EVRET_PURE_PYTHON", "1")
        return None
    if engine._fastrank is None:
        pytest.skip("the compiled accelerator evret_core.metrics._fastrank is not built (no C compiler at install)")
    monkeypatch.delenv("EVRET_PURE_PYTHON", raising=False)
    spy = DictReaderSpy(engine._fastrank, 48)
    monkeypatch.setattr(engine, "_fastrank", spy)
    return spy


@pytest.fixture(scope="session")
def good_results() -> EvaluationResults:
    """The honeybee example evaluated with a retriever ranking by shared words."""
    return evaluate(0)


@pytest.fixture(scope="session")
def bad_results() -> EvaluationResults:
    """The same with the top results swapped away: a significantly worse run."""
    return evaluate(3)
