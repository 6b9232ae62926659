"""Every hook is documented in docs/hooks.md, its example runs, and it has its own test module in tests/hooks/; the
register_evaluators example also runs under ``evret score``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from evret_core import hookimpl
from evret_core.cli import main
from evret_core.contracts import hooks
from evret_core.plugins.loading import register_plugin

from .conftest import REPO

HOOKS_DOC = REPO / "docs" / "hooks.md"


def spec_names() -> list[str]:
    """The hooks pluggy knows about: functions of contracts/hooks.py marked with @hookspec."""
    return sorted(name for name, obj in vars(hooks).items()
                  if callable(obj) and hasattr(obj, f"{hooks.PROJECT_NAME}_spec"))


def sections() -> dict[str, str]:
    text = HOOKS_DOC.read_text(encoding="utf-8")
    parts = re.split(r"^## (\w+)\s*$", text, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_hook_names_constant_lists_every_spec() -> None:
    assert sorted(hooks.HOOK_NAMES) == spec_names()


@pytest.mark.parametrize("hook", spec_names())
def test_hook_is_documented_with_signature_and_example(hook: str) -> None:
    section = sections().get(hook)
    assert section is not None, f"docs/hooks.md has no '## {hook}' section"
    assert re.search(rf"^{hook}\(", section, flags=re.MULTILINE), f"{hook}: no signature line"
    assert "```python" in section, f"{hook}: no example"


@pytest.mark.parametrize("hook", spec_names())
def test_hook_example_runs(hook: str) -> None:
    blocks = re.findall(r"```python\n(.*?)```", sections()[hook], flags=re.DOTALL)
    for block in blocks:
        exec(compile(block, f"docs/hooks.md#{hook}", "exec"), {"__name__": f"hooks_doc_{hook}"})


@pytest.mark.parametrize("hook", spec_names())
def test_hook_has_a_test_module(hook: str) -> None:
    module = REPO / "tests" / "hooks" / f"test_{hook}.py"
    assert module.exists(), f"hook {hook} has no tests: add {module.relative_to(REPO)}"
    assert re.search(r"^def test_", module.read_text(encoding="utf-8"), flags=re.MULTILINE)


def test_no_documented_hook_is_missing_from_the_specs() -> None:
    assert sorted(sections()) == spec_names()


def test_register_evaluators_example_runs_under_evret_score(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """The example's evaluator is registered, then used as a user would: ``evret score`` on a records file."""
    test_hook_example_runs("register_evaluators")
    records = tmp_path / "records.jsonl"
    records.write_text('{"id": "a", "output": "short answer"}\n{"id": "b", "output": "a much longer answer here"}\n',
                       encoding="utf-8")
    rows = tmp_path / "rows.jsonl"
    assert main(["score", str(records), "--evaluator", "length", "--option", "max_words=3",
                 "--output", str(rows)]) == 0
    assert "length: mean 0.5000 over 2 records" in capsys.readouterr().out
    assert [json.loads(line) for line in rows.read_text(encoding="utf-8").splitlines()] == [
        {"record": 1, "id": "a", "score": 1.0}, {"record": 2, "id": "b", "score": 0.0}]


def test_evret_score_names_an_evaluator_whose_results_it_cannot_read(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    class ListEvaluator:  # evaluate() returns bare verdicts, not results
        def evaluate(self, records: list[dict[str, str]]) -> list[bool]:
            return [True for _ in records]

    class Plugin:
        @hookimpl
        def register_evaluators(self, register: Any) -> None:
            register("bare", ListEvaluator)

    register_plugin(Plugin(), name="bare-evaluators")
    records = tmp_path / "records.jsonl"
    records.write_text('{"output": "x"}\n', encoding="utf-8")
    assert main(["score", str(records), "--evaluator", "bare"]) == 2
    err = capsys.readouterr().err
    assert "--evaluator 'bare': evaluate() returned list, not results with 'scores'" in err
    assert "Traceback" not in err
