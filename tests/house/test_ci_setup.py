""".ci/test-setup.sh (run by `make test`) installs Chromium as root without recommended packages and without
upgrading or removing anything already installed, and says exactly what it installs. Run against fake apt-get,
id and useradd commands (only those and awk on PATH): nothing on this machine is installed or changed."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / ".ci" / "test-setup.sh"

NEW_ONLY = """\
NOTE: This is only a simulation!
Inst libxnvctrl0 (525.85.05-3~deb12u1 Debian:12.15/oldstable [amd64])
Inst chromium-common (156.0.8078.79-1~deb12u1 Debian-Security:12/oldstable-security [amd64])
Inst chromium (156.0.8078.79-1~deb12u1 Debian-Security:12/oldstable-security [amd64])
Conf libxnvctrl0 (525.85.05-3~deb12u1 Debian:12.15/oldstable [amd64])
Conf chromium-common (156.0.8078.79-1~deb12u1 Debian-Security:12/oldstable-security [amd64])
Conf chromium (156.0.8078.79-1~deb12u1 Debian-Security:12/oldstable-security [amd64])
"""
WITH_UPGRADE = NEW_ONLY.replace("Inst chromium-common", "Inst libudev1 [252.30-1~deb12u2] (252.38-1~deb12u1 "
                                "Debian:12.15/oldstable [amd64])\nInst chromium-common")
TEX_NEW = """\
Inst tex-common (6.18 Debian:12.15/oldstable [all])
Inst texlive-base (2022.20230122-3 Debian:12.15/oldstable [all])
Inst texlive-latex-base (2022.20230122-3 Debian:12.15/oldstable [all])
Inst texlive-latex-recommended (2022.20230122-3 Debian:12.15/oldstable [all])
"""
TEX_UPGRADE = TEX_NEW + "Inst libpaper1 [1.1.28] (1.1.29 Debian:12.15/oldstable [amd64])\n"
CHROMIUM = "apt-get install -y -q --no-install-recommends chromium"
TEXLIVE = "apt-get install -y -q --no-install-recommends texlive-latex-base texlive-latex-recommended"


def run_setup(tmp_path: Path, plan: str, ci: bool, tex_plan: str = TEX_NEW) -> tuple[str, list[str]]:
    if shutil.which("awk") is None:
        pytest.skip("awk is not installed")
    fake = tmp_path / "bin"
    fake.mkdir()
    log = tmp_path / "calls.log"
    (tmp_path / "plan.txt").write_text(plan)
    (tmp_path / "tex_plan.txt").write_text(tex_plan)
    (fake / "apt-get").write_text(f'#!/bin/bash\necho "apt-get $*" >> {log}\n'
                                  f'[[ " $* " == *" -s "*texlive* ]] && printf "%s\\n" "$(<{tmp_path / "tex_plan.txt"})"'
                                  f' && exit 0\n'
                                  f'[[ " $* " == *" -s "* ]] && printf "%s\\n" "$(<{tmp_path / "plan.txt"})"\n'
                                  "exit 0\n")
    (fake / "id").write_text('#!/bin/bash\ncase "$*" in\n  "-u") echo 0 ;;\n  "-un") echo root ;;\n'
                             '  "-u postgres") echo 999 ;;\nesac\n')
    (fake / "useradd").write_text(f'#!/bin/bash\necho "useradd $*" >> {log}\n')
    for name in ("apt-get", "id", "useradd"):
        (fake / name).chmod(0o755)
    (fake / "awk").symlink_to(shutil.which("awk"))  # type: ignore[arg-type]
    env = {"PATH": str(fake), "HOME": str(tmp_path), **({"CI": "true"} if ci else {})}
    proc = subprocess.run(["/bin/bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    calls = log.read_text().splitlines() if log.exists() else []
    return proc.stdout, calls


@pytest.mark.skipif(not Path("/bin/bash").exists(), reason="needs bash")
def test_chromium_is_installed_without_recommends_and_the_new_packages_are_listed(tmp_path: Path) -> None:
    out, calls = run_setup(tmp_path, NEW_ONLY, ci=False)
    installs = [c for c in calls if " install " in f" {c} " and " -s " not in f" {c} "]
    assert installs == [CHROMIUM, TEXLIVE]
    assert "apt-get -s install --no-install-recommends chromium" in calls  # simulated first
    assert "new packages: libxnvctrl0 chromium-common chromium" in out
    assert "new packages: tex-common texlive-base texlive-latex-base texlive-latex-recommended" in out
    assert calls.count("apt-get update -qq") == 1
    assert not any("upgrade" in c for c in calls)


@pytest.mark.skipif(not Path("/bin/bash").exists(), reason="needs bash")
def test_nothing_is_installed_when_it_would_upgrade_an_installed_package(tmp_path: Path) -> None:
    out, calls = run_setup(tmp_path, WITH_UPGRADE, ci=False)
    assert [c for c in calls if " -s " not in f" {c} " and " install " in f" {c} "] == [TEXLIVE]
    assert "not installing chromium: apt-get would also upgrade or remove installed packages: libudev1 " \
           "[252.30-1~deb12u2]" in out


@pytest.mark.skipif(not Path("/bin/bash").exists(), reason="needs bash")
def test_a_ci_runner_installs_anyway_and_lists_the_upgrades(tmp_path: Path) -> None:
    out, calls = run_setup(tmp_path, WITH_UPGRADE, ci=True)
    assert "apt-get install -y -q --no-install-recommends chromium" in calls
    assert "CI: upgrading or removing, as chromium needs: libudev1 [252.30-1~deb12u2]" in out


@pytest.mark.skipif(not Path("/bin/bash").exists(), reason="needs bash")
def test_pdflatex_is_installed_like_chromium(tmp_path: Path) -> None:
    """texlive-latex-base and texlive-latex-recommended (booktabs) for the LaTeX compile tests, by the same rule:
    nothing that would upgrade an installed package, except in CI."""
    (tmp_path / "local").mkdir()
    (tmp_path / "ci").mkdir()
    out, calls = run_setup(tmp_path / "local", NEW_ONLY, ci=False, tex_plan=TEX_UPGRADE)
    assert [c for c in calls if " -s " not in f" {c} " and " install " in f" {c} "] == [CHROMIUM]
    assert "not installing pdflatex: apt-get would also upgrade or remove installed packages: libpaper1 [1.1.28]" in out
    assert "the LaTeX compile tests will skip" in out
    out, calls = run_setup(tmp_path / "ci", NEW_ONLY, ci=True, tex_plan=TEX_UPGRADE)
    assert TEXLIVE in calls and "CI: upgrading or removing, as pdflatex needs: libpaper1 [1.1.28]" in out


def test_the_readme_says_what_the_setup_does() -> None:
    readme = (REPO / "README.md").read_text()
    assert "--no-install-recommends" in readme and "upgrade" in readme
    assert "texlive-latex-base texlive-latex-recommended" in readme
    assert os.access(SCRIPT, os.R_OK)


def make_dry_run(*variables: str) -> list[str]:
    """The pip commands `make install-all` would run (make -n), one per line."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    out = subprocess.run(["make", "-n", "install-all", *variables], cwd=REPO, capture_output=True, text=True,
                         timeout=60, check=True).stdout
    return [line for line in out.splitlines() if " pip install " in line]


def test_make_test_installs_torch_first_from_the_index_a_user_names() -> None:
    plain = make_dry_run()
    assert "torch==" in plain[0] and "--index-url" not in plain[0]
    cpu = make_dry_run("TORCH_INDEX=https://download.pytorch.org/whl/cpu")
    assert "torch==" in cpu[0] and cpu[0].endswith("--index-url https://download.pytorch.org/whl/cpu")
    assert "--index-url" not in cpu[1]  # only torch comes from PyTorch's index
    assert all(" -q" not in line for line in plain)  # pip prints what it collects: the install shows progress
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "make test TORCH_INDEX=https://download.pytorch.org/whl/cpu" in readme


def test_readme_counts_the_packages_make_test_installs() -> None:
    import importlib.metadata
    import re
    import sys

    if Path(sys.prefix).resolve() != (REPO / ".venv").resolve():
        pytest.skip("not running in the .venv that `make test` made")
    if not importlib.metadata.version("torch").endswith("+cpu"):
        pytest.skip("torch is not the CPU build: the CUDA build brings about 15 packages more than the README counts")
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    said = re.search(r"(\d+)\s+packages and ([\d.]+) GB with the CPU build of torch", readme)
    assert said, "the README says how many packages `make test` installs"
    installed = len({d.metadata["Name"].lower() for d in importlib.metadata.distributions()})
    assert abs(installed - int(said[1])) <= 0.05 * int(said[1]), (installed, said[0])
