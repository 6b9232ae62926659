"""Plugins that misbehave: sys.exit() while loading, exceptions at run time (one line, secrets kept), a name
registered twice, and the pluggy features (specname, tryfirst/trylast) that calling hooks through pluggy gives."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from evret_core import PluginError, create_judge, hookimpl, list_plugins
from evret_core.plugins.loading import register_plugin

from .._helpers import FakePlugin
from .test_plugins import GOOD, run_cli

EXITS_ON_IMPORT = """
import sys
sys.exit(3)
"""

EXITS_IN_HOOK = """
import sys
from evret_core import hookimpl

@hookimpl
def register_judges(register):
    sys.exit()
"""

INTERRUPTS = """
raise KeyboardInterrupt
"""

TWICE = GOOD.replace('register("shout", ShoutJudge)', 'register("shout", ShoutJudge)\n    register("shout", ShoutJudge)')

SECRET = "sk-live-0123456789abcdef"
OPTION_SECRET = "opt-secret-42424242"

FAILING = """
import os
from evret_core import Judge, RetrievalResult, Retriever, hookimpl


class UpstreamError(Exception):
    pass


class FailingJudge(Judge):
    name = "failing"

    def judge(self, context):
        raise UpstreamError("401 from upstream for key " + os.environ.get("EVRET_TEST_API_KEY", ""))


class ExitingJudge(Judge):
    name = "exiting"

    def __init__(self, how: str = "exit"):
        self.how = how

    def batch_judge(self, contexts):
        import sys

        if self.how == "interrupt":
            raise KeyboardInterrupt
        sys.exit(5 if self.how == "exit" else "a message with key " + os.environ.get("EVRET_TEST_API_KEY", ""))

    def judge(self, context):
        return self.batch_judge([context])[0]


def exiting_factory(**options):
    raise SystemExit(9)


def failing_factory(**options):
    raise KeyError(f"cannot build with {options}")


class OneDoc(Retriever):
    name = "one-doc"

    def __init__(self, fail: bool = False):
        self.fail = fail

    def retrieve(self, query, k):
        if self.fail == "exit":
            raise SystemExit(7)
        if self.fail:
            raise ConnectionError("index down; token " + os.environ.get("EVRET_TEST_API_KEY", ""))
        return [RetrievalResult(doc_id="d1", score=1.0, metadata={"text": "honey never spoils"})]


@hookimpl
def register_judges(register):
    register("failing", FailingJudge)
    register("failing-factory", failing_factory)
    register("exiting", ExitingJudge)
    register("exiting-factory", exiting_factory)


@hookimpl
def register_retrievers(register):
    register("one-doc", OneDoc)
"""


# -- issue 13 item 16: sys.exit() is isolated like any other failure, KeyboardInterrupt is not swallowed ---------
def test_plugin_calling_sys_exit_on_import_is_reported_and_the_rest_works(fake_plugin: FakePlugin) -> None:
    fake_plugin("evret-exits", EXITS_ON_IMPORT)
    site = fake_plugin("evret-shout", GOOD)
    info = {p.name: p for p in list_plugins()}
    assert info["evret-exits"].error == "import failed: SystemExit: the plugin called sys.exit(3)"
    assert create_judge("shout") is not None and create_judge("exact") is not None
    proc = run_cli("plugins", pythonpath=site)
    assert proc.returncode == 0, proc.stderr
    assert "ERROR: import failed: SystemExit" in proc.stdout and "judges: shout" in proc.stdout


def test_plugin_calling_sys_exit_in_a_hook_is_reported(fake_plugin: FakePlugin) -> None:
    site = fake_plugin("evret-exits", EXITS_IN_HOOK)
    fake_plugin("evret-shout", GOOD)
    info = {p.name: p for p in list_plugins()}
    assert info["evret-exits"].error == "registration failed: SystemExit: the plugin called sys.exit(None)"
    assert create_judge("shout") is not None
    assert run_cli("plugins", pythonpath=site).returncode == 0


def test_keyboard_interrupt_while_loading_goes_through(fake_plugin: FakePlugin) -> None:
    fake_plugin("evret-interrupts", INTERRUPTS)
    with pytest.raises(KeyboardInterrupt):
        list_plugins()


# -- issue 13 item 18: one plugin registering a name twice ----------------------------------------------------------
def test_same_plugin_registering_a_name_twice_is_an_error_naming_both(fake_plugin: FakePlugin) -> None:
    fake_plugin("evret-twice", TWICE)
    info = {p.name: p for p in list_plugins()}["evret-twice"]
    assert info.error == "registration failed: PluginError: plugin 'evret-twice' registers judge 'shout' twice"
    with pytest.raises(PluginError, match="plugin 'in-process' registers metric 'same' twice"):
        register_plugin(_TwicePlugin(), name="in-process")


class _TwicePlugin:
    @hookimpl
    def register_metrics(self, register):  # type: ignore[no-untyped-def]
        register("same", object)
        register("same", object)


def test_the_same_name_in_two_kinds_is_fine() -> None:
    class Plugin:
        @hookimpl
        def register_judges(self, register):  # type: ignore[no-untyped-def]
            register("both", lambda: "judge")

        @hookimpl
        def register_retrievers(self, register):  # type: ignore[no-untyped-def]
            register("both", lambda: "retriever")

    info = register_plugin(Plugin(), name="two-kinds")
    assert info.registers == {"judge": ["both"], "retriever": ["both"]} and info.error is None


# -- issue 13 item 17: run-time failures of a plugin ----------------------------------------------------------------
@pytest.fixture
def failing_site(fake_plugin: FakePlugin, tmp_path: Path) -> Path:
    site = fake_plugin("evret-failing", FAILING)
    (tmp_path / "d.jsonl").write_text(json.dumps({"query_id": "q1", "query": "honey",
                                                  "expected_answers": ["honey never spoils"]}) + "\n")
    return site


def _evaluate(site: Path, tmp_path: Path, *options: str, debug: bool = False) -> tuple[int, str]:
    proc = run_cli(*(["--debug"] if debug else []), "evaluate", "--dataset", str(tmp_path / "d.jsonl"),
                   "--metric", "hit_rate@1", "--no-progress", *options, pythonpath=site,
                   env={"EVRET_TEST_API_KEY": SECRET}, cwd=tmp_path)
    assert proc.stdout.count(SECRET) == 0
    return proc.returncode, proc.stderr


@pytest.mark.parametrize(("options", "kind", "shown"), [
    (("--retriever", "one-doc", "--judge", "failing"), "UpstreamError", "401 from upstream for key ***"),
    (("--retriever", "one-doc", "--retriever-option", "fail=true", "--judge", "exact"), "ConnectionError",
     "index down; token ***"),
    (("--retriever", "one-doc", "--judge", "failing-factory", "--judge-option", f"api_key={OPTION_SECRET}"),
     "KeyError", "\"cannot build with {'api_key': '***'}\""),
])
def test_run_time_failure_is_one_line_naming_the_plugin_and_its_masked_message(
    failing_site: Path, tmp_path: Path, options: tuple[str, ...], kind: str, shown: str
) -> None:
    code, err = _evaluate(failing_site, tmp_path, *options)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert lines[0] == (f"evret: error: plugin 'evret-failing' (distribution evret-failing 0.1.0) failed: {kind}: "
                        f"{shown} (run with --debug for the traceback)")
    assert SECRET not in err and OPTION_SECRET not in err and "Traceback" not in err


@pytest.mark.parametrize(("options", "shown"), [
    (("--retriever", "one-doc", "--judge", "failing"), "401 from upstream for key ***"),
    (("--retriever", "one-doc", "--retriever-option", "fail=true"), "index down; token ***"),
    (("--retriever", "one-doc", "--judge", "failing-factory", "--judge-option", f"api_key={OPTION_SECRET}"),
     "cannot build with {'api_key': '***'}"),
])
def test_debug_shows_the_traceback_with_secrets_masked(
    failing_site: Path, tmp_path: Path, options: tuple[str, ...], shown: str
) -> None:
    code, err = _evaluate(failing_site, tmp_path, *options, debug=True)
    assert code == 2 and "Traceback (most recent call last)" in err and shown in err, err
    assert SECRET not in err and OPTION_SECRET not in err
    assert err.strip().splitlines()[-1].startswith("evret: error: plugin 'evret-failing'")


# -- issue 24 (red-team R17c): sys.exit() in a plugin's code while evret runs is that plugin's failure -------------
@pytest.mark.parametrize(("options", "shown"), [
    (("--retriever", "one-doc", "--judge", "exiting"), "sys.exit(5)"),
    (("--retriever", "one-doc", "--judge", "exiting", "--judge-option", "how=message"), "sys.exit(...)"),
    (("--retriever", "one-doc", "--retriever-option", "fail=exit", "--judge", "exact"), "sys.exit(7)"),
    (("--retriever", "one-doc", "--judge", "exiting-factory"), "sys.exit(9)"),
])
def test_a_plugin_calling_sys_exit_while_running_is_one_line_and_exit_2(
    failing_site: Path, tmp_path: Path, options: tuple[str, ...], shown: str
) -> None:
    code, err = _evaluate(failing_site, tmp_path, *options)
    assert code == 2 and err.strip().splitlines() == [
        f"evret: error: plugin 'evret-failing' (distribution evret-failing 0.1.0) called {shown} while evret ran "
        "it; a plugin must raise an exception instead"], err
    assert SECRET not in err


def test_a_plugin_calling_sys_exit_from_python_is_a_plugin_error(failing_site: Path) -> None:
    from evret_core import EvaluationDataset, Evaluator, QueryExample, create_retriever

    dataset = EvaluationDataset(queries=[QueryExample(query_id="q1", query_text="honey",
                                                      expected_answers=["honey never spoils"])])
    with pytest.raises(PluginError, match=r"plugin 'evret-failing' .* called sys.exit\(5\) while evret ran it"):
        Evaluator(create_retriever("one-doc"), metrics=["hit_rate@1"], judge=create_judge("exiting")).evaluate(dataset)
    with pytest.raises(PluginError, match=r"called sys.exit\(9\)"):
        create_judge("exiting-factory")
    with pytest.raises(SystemExit):  # the user's own sys.exit() is theirs: it goes through
        Evaluator(lambda query, k: sys.exit(3), metrics=["hit_rate@1"], judge="exact").evaluate(dataset)


def test_a_plugins_keyboard_interrupt_still_interrupts(failing_site: Path, tmp_path: Path) -> None:
    code, err = _evaluate(failing_site, tmp_path, "--retriever", "one-doc", "--judge", "exiting",
                          "--judge-option", "how=interrupt")
    assert code == 130 and err.strip() == "evret: interrupted"


def test_the_cores_own_sys_exit_goes_through() -> None:
    from evret_core.cli import main

    with pytest.raises(SystemExit) as raised:
        main(["evaluate", "--no-such-option"])  # argparse's own exit, not a plugin's
    assert raised.value.code == 2


def test_the_cores_own_bugs_keep_their_traceback() -> None:
    from evret_core.plugins.loading import get_registry

    get_registry().ensure_loaded()
    try:
        create_judge("token-overlap").judge(None)  # type: ignore[arg-type]
    except AttributeError as exc:
        assert get_registry().plugin_of(exc.__traceback__) is None
    else:
        pytest.fail("judging None should fail")


# -- issue 14 part 4: hooks go through pluggy ------------------------------------------------------------------------
def test_specname_and_tryfirst_apply() -> None:
    calls: list[str] = []

    class Plugin:
        @hookimpl(specname="register_judges", trylast=True)
        def judges_last(self, register):  # type: ignore[no-untyped-def]
            calls.append("last")
            register("late", lambda: "late")

        @hookimpl(specname="register_judges", tryfirst=True)
        def judges_first(self, register):  # type: ignore[no-untyped-def]
            calls.append("first")
            register("early", lambda: "early")

    info = register_plugin(Plugin(), name="spec-named")
    assert calls == ["first", "last"]
    assert info.registers == {"judge": ["early", "late"]}
    assert create_judge("early") == "early" and create_judge("late") == "late"


def test_a_plugins_hookwrapper_wraps_its_own_hooks_only() -> None:
    seen: list[str] = []

    class Plugin:
        @hookimpl(wrapper=True)
        def register_metrics(self, register):  # type: ignore[no-untyped-def]
            seen.append("before")
            result = yield
            seen.append("after")
            return result

        @hookimpl(specname="register_metrics")
        def metrics(self, register):  # type: ignore[no-untyped-def]
            register("wrapped", object)

    info = register_plugin(Plugin(), name="wrapping")
    assert seen == ["before", "after"] and info.registers == {"metric": ["wrapped"]}


# -- issue 33 (newcomer item 10): a plugin that failed to load is named when a name is not found ---------------
MISSING_DEPENDENCY = """
import nosuchdependency_xyz  # the usual way a plugin breaks: a dependency that is not installed
"""


def test_an_unknown_name_names_the_installed_plugin_that_failed_to_load(fake_plugin: FakePlugin,
                                                                         tmp_path: Path) -> None:
    from evret_core.contracts.errors import UnknownNameError

    site = fake_plugin("evret-brokenjudge", MISSING_DEPENDENCY)
    with pytest.raises(UnknownNameError) as info:
        create_judge("brokenjudge")
    message = str(info.value)
    assert "unknown judge 'brokenjudge'" in message
    assert ("plugin 'evret-brokenjudge' (distribution evret-brokenjudge 0.1.0) failed to load: import failed: "
            "ModuleNotFoundError: No module named 'nosuchdependency_xyz'") in message
    (tmp_path / "d.jsonl").write_text(json.dumps({"query_id": "q1", "query": "honey",
                                                  "expected_answers": ["honey"]}) + "\n")
    (tmp_path / "run.jsonl").write_text(json.dumps({"query_id": "q1", "doc_id": "d1", "rank": 1, "score": 1.0,
                                                    "text": "honey"}) + "\n")
    proc = run_cli("evaluate", "--dataset", str(tmp_path / "d.jsonl"), "--run", str(tmp_path / "run.jsonl"),
                   "--metric", "hit_rate@1", "--judge", "brokenjudge", pythonpath=site, cwd=tmp_path)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "unknown judge 'brokenjudge'" in lines[0] and "'evret-brokenjudge'" in lines[0]
    assert "No module named 'nosuchdependency_xyz'" in lines[0]


def test_a_known_name_does_not_mention_broken_plugins(fake_plugin: FakePlugin) -> None:
    fake_plugin("evret-brokenjudge", MISSING_DEPENDENCY)
    assert create_judge("exact") is not None


@pytest.mark.parametrize("name", ["lancedb", "llamaindex", "haystack", "opensearch", "milvus"])
def test_every_bundled_retrievers_unknown_name_names_its_distribution(name: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from evret_core import create_retriever
    from evret_core.contracts.errors import UnknownNameError

    monkeypatch.setenv("EVRET_DISABLE_PLUGINS", f"evret-{name}")
    with pytest.raises(UnknownNameError, match=f"Plugin 'evret-{name}' is installed but disabled"):
        create_retriever(name)
