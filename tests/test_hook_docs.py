"""Every hook is documented in docs/hooks.md, its example runs, and it has its own test module in tests/hooks/."""

from __future__ import annotations

import re

import pytest

from evret_core import hookspecs

from .conftest import REPO

HOOKS_DOC = REPO / "docs" / "hooks.md"


def spec_names() -> list[str]:
    """The hooks pluggy knows about: functions of hookspecs.py marked with @hookspec."""
    return sorted(name for name, obj in vars(hookspecs).items()
                  if callable(obj) and hasattr(obj, f"{hookspecs.PROJECT_NAME}_spec"))


def sections() -> dict[str, str]:
    text = HOOKS_DOC.read_text(encoding="utf-8")
    parts = re.split(r"^## (\w+)\s*$", text, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_hook_names_constant_lists_every_spec() -> None:
    assert sorted(hookspecs.HOOK_NAMES) == spec_names()


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
