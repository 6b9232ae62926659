"""Every hook is documented in docs/hooks.md with its hookspec's signature, its example runs and passes its kind's
conformance suite, and it has its own test module in tests/hooks/; the register_evaluators example also runs under
``evret score``."""

from __future__ import annotations

import inspect
import json
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest

from evret_core import hookimpl
from evret_core.cli import main
from evret_core.contracts import hooks, kinds
from evret_core.plugins.loading import register_plugin

from .._paths import REPO

HOOKS_DOC = REPO / "docs" / "hooks.md"
pytest_plugins = ["pytester"]


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


def rendered_signature(hook: str) -> str:
    """The hookspec's signature as docs/hooks.md writes it: annotations as written, ``# firstresult`` when set."""
    spec = getattr(hooks, hook)
    signature = inspect.signature(spec)
    params = ", ".join(f"{p.name}: {p.annotation}" for p in signature.parameters.values())
    line = f"{hook}({params}) -> {signature.return_annotation}"
    options = getattr(spec, f"{hooks.PROJECT_NAME}_spec", {})
    return f"{line}   # firstresult" if options.get("firstresult") else line


@pytest.mark.parametrize("hook", spec_names())
def test_documented_signature_is_the_hookspec(hook: str) -> None:
    blocks = re.findall(r"```text\n(.*?)\n```", sections()[hook], flags=re.DOTALL)
    assert blocks and blocks[0] == rendered_signature(hook), f"{hook}: docs/hooks.md says {blocks[:1]}"


# What each hook's example needs to run through its suite beyond the object it registers (``FACTORY``, ``NAME``):
# the suite's settings and fixtures, as a class body. An LLM provider that runs in process (the example's constant
# provider) has InProcessProviderConformance as its suite.
SUITE_SETTINGS = {
    "register_judges": """
        @pytest.fixture
        def judge(self):
            return FACTORY()
    """,
    "register_metrics": """
        family = NAME
        known = {NAME: 0.0}  # the known ranking starts with a non-relevant document
    """,
    "register_retrievers": """
        @pytest.fixture
        def retriever(self):
            return FACTORY(documents={"d1": "retrieval augmented generation grounds answers",
                                      "d2": "vector databases work on embeddings",
                                      "d3": "what bees make"})
    """,
    "register_evaluators": """
        @pytest.fixture
        def evaluator(self):
            return FACTORY(max_words=3)

        @pytest.fixture
        def records(self):
            return [{"output": "Paris"}, {"output": "it is the city of Rome"}, {"output": "Rome"}]
    """,
    "register_retrieval_evaluators": """
        name = NAME
    """,
    "register_llm_providers": """
        def options(self):
            return {"provider": NAME}

        @pytest.mark.xfail(reason="the example provider answers at once: no call outlasts a timeout", strict=True)
        def test_a_call_past_its_timeout_is_unmeasured_and_frees_the_model(self):
            super().test_a_call_past_its_timeout_is_unmeasured_and_frees_the_model()
    """,
    "register_generators": """
        refuses = False  # it refuses only when it has no context

        @pytest.fixture
        def generator(self):
            return FACTORY()
    """,
    "register_perturbations": """
        family = NAME
    """,
    "register_claim_judges": """
        @pytest.fixture
        def claim_judge(self):
            return FACTORY()
    """,
    "register_rag_scores": """
        name = NAME
    """,
    "register_executors": """
        @pytest.fixture
        def executor(self):
            return FACTORY()
    """,
    "register_rerankers": """
        @pytest.fixture
        def reranker(self):
            return FACTORY()
    """,
    "register_rewriters": """
        @pytest.fixture
        def rewriter(self):
            return FACTORY()
    """,
}


def test_every_kind_has_its_example_settings() -> None:
    assert sorted(SUITE_SETTINGS) == sorted(kind.hook for kind in kinds.KINDS)


@pytest.mark.parametrize("hook", sorted(SUITE_SETTINGS))
def test_hook_example_passes_its_kinds_suite(hook: str, pytester: pytest.Pytester) -> None:
    """A test module that runs the example, then subclasses the kind's suite with the object the example
    registered (looked up in the registry by the name it registers)."""
    example = "\n".join(re.findall(r"```python\n(.*?)```", sections()[hook], flags=re.DOTALL))
    names = re.findall(r"register\(\"([^\"]+)\"", example)
    assert len(names) == 1, names
    kind = next(k for k in kinds.KINDS if k.hook == hook)
    suite = "InProcessProviderConformance" if hook == "register_llm_providers" else f"SUITES[kinds.{kind.name.upper()}]"
    pytester.makepyfile(test_example=f"""
import pytest

from evret_core.contracts import kinds
from evret_core.plugins.loading import get_registry
from evret_core.testing import SUITES, InProcessProviderConformance

exec(compile({example!r}, "docs/hooks.md#{hook}", "exec"), {{"__name__": "hooks_doc_{hook}"}})
NAME = {names[0]!r}
FACTORY = get_registry().get({kind.name!r}, NAME)


class TestExample({suite}):
{textwrap.indent(textwrap.dedent(SUITE_SETTINGS[hook]).strip(), "    ")}
""")
    # in a process of its own: numpy's extension modules load once per process, and the example registers globally
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q", "-rfEsx")
    outcomes = result.parseoutcomes()
    summary = "\n".join(result.outlines[-40:])
    assert outcomes.get("passed", 0) > 0 and not outcomes.get("failed") and not outcomes.get("errors"), summary


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
