"""The tests mirror the package layout: each test file lives in ``tests/<folder>/``, where the folder is named after
the package or top-level module of evret_core it tests (``tests/io`` for ``evret_core/io/``, ``tests/assign`` for
``evret_core/assign.py``) or is one of the folders of tests that no single package owns; no two test files share a
file name, so a name finds one file."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"

ACROSS_PACKAGES = {
    "conformance": "every kind's conformance suite on the built-ins, the test kit's stub provider, the suites' guard",
    "hooks": "one module per hook of docs/hooks.md, its example run through its kind's suite",
    "house": "the house rules: the import graph and the layers, faces, startup imports, plugin layout, this file",
    "golden": "reports, results files and terminal output compared byte for byte with stored copies",
    "docs": "docs and README examples run as written, and what the docs may say",
}
"""The folders of tests/ that are not a package of evret_core, each with what it holds."""

DATA_FOLDERS = {
    "results/data": "results files written by earlier versions of Evret, read back by tests/results",
    "golden/inputs": "the inputs of the golden commands",
    "golden/expected": "the outputs the golden commands must reproduce",
    "metrics/data": "trec_eval 10.0 -J outputs on trec_eval's test files (README.md there: the commands)",
}
"""Folders below tests/<folder>/ (data only, no test file), each with why it is there."""


def package_names() -> set[str]:
    """The packages and top-level modules of evret_core, by the names the layers of docs/architecture.md use."""
    base = ROOT / "evret_core"
    return {p.name for p in base.iterdir() if (p / "__init__.py").is_file()} | {
        p.stem for p in base.glob("*.py") if p.stem != "__init__"}


def _folders(tests: Path) -> list[str]:
    return sorted(p.relative_to(tests).as_posix() for p in tests.rglob("*") if p.is_dir()
                  and "__pycache__" not in p.parts)


def layout_problems(tests: Path, packages: set[str]) -> list[str]:
    """What in the tree ``tests`` does not mirror ``packages`` (see the module docstring)."""
    problems = []
    allowed = packages | set(ACROSS_PACKAGES)
    for folder in _folders(tests):
        top, _, below = folder.partition("/")
        if not below and top not in allowed:
            problems.append(f"tests/{folder}/ is neither a package of evret_core nor one of {sorted(ACROSS_PACKAGES)}")
        elif below and folder not in DATA_FOLDERS and not any(folder.startswith(d + "/") for d in DATA_FOLDERS):
            problems.append(f"tests/{folder}/ is a folder below tests/{top}/ that DATA_FOLDERS does not list")
    test_files = sorted(tests.rglob("test_*.py"))
    for path in test_files:
        parts = path.relative_to(tests).parts
        if len(parts) != 2 or "/".join(parts[:-1]) in DATA_FOLDERS:
            problems.append(f"tests/{'/'.join(parts)} is not in a folder tests/<package>/")
    by_name: dict[str, list[str]] = {}
    for path in test_files:
        by_name.setdefault(path.name, []).append(path.relative_to(tests).as_posix())
    problems += [f"{name} is the name of {len(paths)} test files: {', '.join(paths)}"
                 for name, paths in sorted(by_name.items()) if len(paths) > 1]
    return problems


def test_the_check_finds_each_problem(tmp_path: Path) -> None:
    for name in ("io/test_corpus.py", "io/test_progress.py", "progress/test_progress.py", "test_top.py",
                 "workflow/test_gates.py", "house/test_rules.py", "results/data/old.json", "results/deep/test_x.py",
                 "golden/inputs/test_input.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    assert layout_problems(tmp_path, {"io", "progress", "results"}) == [
        "tests/results/deep/ is a folder below tests/results/ that DATA_FOLDERS does not list",
        "tests/workflow/ is neither a package of evret_core nor one of ['conformance', 'docs', 'golden', 'hooks', "
        "'house']",
        "tests/golden/inputs/test_input.py is not in a folder tests/<package>/",
        "tests/results/deep/test_x.py is not in a folder tests/<package>/",
        "tests/test_top.py is not in a folder tests/<package>/",
        "test_progress.py is the name of 2 test files: io/test_progress.py, progress/test_progress.py",
    ]


def test_the_package_names_are_those_of_the_layers() -> None:
    names = package_names()
    assert {"contracts", "io", "judge", "rag", "assign", "progress", "pytest_plugin", "testsets"} <= names
    assert "__init__" not in names


def test_the_tests_mirror_the_package_layout() -> None:
    problems = layout_problems(TESTS, package_names())
    assert problems == [], "\n".join(problems)


def test_the_data_folders_exist() -> None:
    assert [d for d in DATA_FOLDERS if not (TESTS / d).is_dir()] == []
