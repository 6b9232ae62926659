"""The old import paths of moved modules (evret_core/_moved.py) map only the listed modules: a path under an old
package name that was never a module raises ModuleNotFoundError instead of running a second copy of a module."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-W", "ignore::DeprecationWarning", "-c", textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=120)


def test_a_path_under_an_old_package_that_was_never_a_module_is_not_found() -> None:
    done = _run("""
        import sys
        import evret_core.evaluation.config as real
        for name in ("evret_core.evaluators.config", "evret_core.evaluators.executors",
                     "evret_core.judges.context_columns", "evret_core.generate.nope"):
            try:
                __import__(name)
            except ModuleNotFoundError as exc:
                assert exc.name == name, exc.name
                print("not found:", name, "|", exc)
            else:
                print("IMPORTED", name, sys.modules[name].__file__)
            assert name not in sys.modules
        print(sum(1 for m in sys.modules.values() if getattr(m, "__file__", None) == real.__file__), "copy")
    """)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split(" |")[0] for line in lines[:-1]] == [
        "not found: evret_core.evaluators.config", "not found: evret_core.evaluators.executors",
        "not found: evret_core.judges.context_columns", "not found: evret_core.generate.nope"]
    assert "old path of evret_core.evaluation" in lines[0] and lines[-1] == "1 copy"


def test_the_listed_old_paths_still_give_the_same_module_object() -> None:
    done = _run("""
        import evret_core.evaluators.retrieval as old, evret_core.evaluation.evaluator as new
        import evret_core.evaluators as old_package, evret_core.evaluation as new_package
        import evret_core.judges.text as old_text, evret_core.judge.text as new_text
        from evret_core.evaluators import config
        import evret_core.evaluation.config as real_config
        print(old is new, old_package is new_package, old_text is new_text, config is real_config)
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True"] * 4
