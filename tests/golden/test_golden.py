"""The CLI's outputs on the bundled examples are byte-identical to the stored golden files (tests/golden/expected,
written by ``python tests/golden/make.py``), after masking only what two runs of the same code write differently.

Every command of make.py's list runs once per session, each in a fresh process (about 15-30 s in all). A failure
shows a diff; when an output changed on purpose, regenerate with make.py and say so in the commit.
"""

from __future__ import annotations

import difflib
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

HERE = Path(__file__).resolve().parent
EXPECTED = HERE / "expected"

pytest.importorskip("evret_bm25", reason="the golden commands use evret-bm25 (make test installs every plugin)")


def _load_make() -> ModuleType:
    spec = importlib.util.spec_from_file_location("evret_golden_make", HERE / "make.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


make = _load_make()
STORED = sorted(p.name for p in EXPECTED.iterdir())


@pytest.fixture(scope="module")
def produced(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    outputs: dict[str, bytes] = make.run_all(tmp_path_factory.mktemp("golden"))
    return outputs


def test_every_command_writes_the_stored_files(produced: dict[str, bytes]) -> None:
    assert sorted(produced) == STORED


@pytest.mark.parametrize("name", STORED)
def test_output_is_byte_identical(produced: dict[str, bytes], name: str) -> None:
    expected = (EXPECTED / name).read_bytes()
    got = produced.get(name)
    assert got is not None, f"{name}: no longer written"
    if got != expected:
        diff = difflib.unified_diff(expected.decode("utf-8").splitlines(), got.decode("utf-8").splitlines(),
                                    f"expected/{name}", f"now/{name}", lineterm="", n=2)
        pytest.fail("\n".join(list(diff)[:80]), pytrace=False)


def test_every_mask_is_needed_and_leaves_valid_documents(produced: dict[str, bytes]) -> None:
    """Each mask replaces something in some output (a mask that matches nothing is stale and would hide nothing
    it was meant to hide, or something it was not), and a masked results file is still JSON once its
    placeholders are put back as values."""
    text = b"".join(produced.values()).decode("utf-8")
    for mask in make.MASKS:
        assert f"<{mask.name}>" in text, mask.name
    for name, data in produced.items():
        if name.endswith(".json"):
            doc = data.decode("utf-8")
            for mask in make.MASKS:
                doc = doc.replace(f'"<{mask.name}>"', "null").replace(f"<{mask.name}>", "null")
            assert isinstance(json.loads(doc), dict), name


def test_the_masks_find_what_varies() -> None:
    """A mask replaces its value (group 1) and nothing around it, in results JSON and in an HTML report alike."""
    masked = make.mask('"created_at": "2026-01-02T03:04:05+00:00",\n&#34;elapsed_s&#34;: 0.25,\n'
                       '"base_url": "http://127.0.0.1:4321/v1"', Path("/nowhere"))
    assert masked == '"created_at": "<created_at>",\n&#34;elapsed_s&#34;: <elapsed_s>,\n"base_url": ' \
                     '"http://127.0.0.1:<port>/v1"'
    assert make.mask('"elapsed_s": 1e-05, "k": 10', Path("/nowhere")) == '"elapsed_s": <elapsed_s>, "k": 10'


def test_the_accelerator_is_built() -> None:
    """The stored bootstrap intervals were summed by the compiled accelerator; its numpy fallback adds in another
    order (equal to about 1e-14, relative), so without it the RAG intervals differ in their last digits."""
    assert importlib.util.find_spec("evret_core.metrics._fastrank") is not None, (
        "evret_core.metrics._fastrank is not built: pip install -e . (or python setup.py build_ext --inplace)")
