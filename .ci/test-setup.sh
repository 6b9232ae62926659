#!/usr/bin/env bash
# Installs what the test suite needs beyond Python packages, when missing, and says what it does. Idempotent.
# Needs root for both steps (apt-get, useradd); without root it only reports what is missing, and the tests that
# need it skip outside CI (in CI, CI=true, they fail instead).
set -euo pipefail
say() { echo "test-setup: $*"; }

# Debian packages some tests need, installed without recommended packages and never by upgrading a package already
# installed: apt-get simulates the install first (apt-get -s), and when that would upgrade or remove anything the
# script installs nothing and says what it would have changed (CI=true, a throwaway runner, installs anyway and lists
# the upgrades). apt_install WHAT TESTS PACKAGE...
updated=""
apt_install() {
    local what=$1 tests=$2 plan new changed
    shift 2
    [ -n "$updated" ] || { apt-get update -qq; updated=1; }
    plan=$(apt-get -s install --no-install-recommends "$@")
    new=$(awk '$1 == "Inst" && $3 !~ /^\[/ {printf " %s", $2}' <<<"$plan")
    changed=$(awk '($1 == "Inst" && $3 ~ /^\[/) {printf " %s %s", $2, $3} $1 == "Remv" {printf " %s (removed)", $2}' \
              <<<"$plan")
    if [ -n "$changed" ] && [ -z "${CI:-}" ]; then
        say "not installing $what: apt-get would also upgrade or remove installed packages:$changed"
        say "$tests will skip; install $what yourself (apt-get install --no-install-recommends $*)"
        return 0
    fi
    [ -n "$changed" ] && say "CI: upgrading or removing, as $what needs:$changed"
    say "installing with apt-get install --no-install-recommends $*, new packages:$new"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@"
}

# headless Chromium renders the HTML report in tests/results/test_html_report.py
if command -v chromium >/dev/null || command -v chromium-browser >/dev/null; then
    say "chromium is installed"
elif [ "$(id -u)" = 0 ]; then
    apt_install chromium "the browser test" chromium
else
    say "chromium is missing and this is not root: the browser test will skip (apt-get install chromium as root)"
fi

# pdflatex compiles the LaTeX reports in tests/results/test_report_escaping.py: texlive-latex-base, and
# texlive-latex-recommended for booktabs (the report's one package)
if command -v pdflatex >/dev/null && kpsewhich booktabs.sty >/dev/null 2>&1; then
    say "pdflatex (with booktabs) is installed"
elif [ "$(id -u)" = 0 ]; then
    apt_install pdflatex "the LaTeX compile tests" texlive-latex-base texlive-latex-recommended
else
    say "pdflatex or booktabs is missing and this is not root: the LaTeX compile tests will skip (apt-get install" \
        "texlive-latex-base texlive-latex-recommended as root)"
fi

# evret-pgvector's tests run PostgreSQL (binaries from the pgserver wheel); it refuses to run as root, so as root
# the tests run it as this user.
if [ "$(id -u)" = 0 ]; then
    if id -u postgres >/dev/null 2>&1; then
        say "system user 'postgres' exists"
    else
        say "creating system user 'postgres' (no home, no login shell) to run PostgreSQL for evret-pgvector's tests"
        useradd --system --user-group --no-create-home --shell /usr/sbin/nologin postgres
    fi
else
    say "not root: PostgreSQL for evret-pgvector's tests runs as $(id -un)"
fi

exit 0
