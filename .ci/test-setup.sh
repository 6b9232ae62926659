#!/usr/bin/env bash
# Installs what the test suite needs beyond Python packages, when missing, and says what it does. Idempotent.
# Needs root for both steps (apt-get, useradd); without root it only reports what is missing, and the tests that
# need it skip outside CI (in CI, CI=true, they fail instead).
set -euo pipefail
say() { echo "test-setup: $*"; }

# headless Chromium renders the HTML report in tests/results/test_html_report.py. It is installed without
# recommended packages and never by upgrading a package already installed: apt-get simulates the install first
# (apt-get -s), and when that would upgrade or remove anything the script installs nothing and says what it would
# have changed (CI=true, a throwaway runner, installs anyway and lists the upgrades).
install_chromium() {
    apt-get update -qq
    local plan new changed
    plan=$(apt-get -s install --no-install-recommends chromium)
    new=$(awk '$1 == "Inst" && $3 !~ /^\[/ {printf " %s", $2}' <<<"$plan")
    changed=$(awk '($1 == "Inst" && $3 ~ /^\[/) {printf " %s %s", $2, $3} $1 == "Remv" {printf " %s (removed)", $2}' \
              <<<"$plan")
    if [ -n "$changed" ] && [ -z "${CI:-}" ]; then
        say "not installing chromium: apt-get would also upgrade or remove installed packages:$changed"
        say "the browser test will skip; install chromium yourself (apt-get install --no-install-recommends chromium)"
        return 0
    fi
    [ -n "$changed" ] && say "CI: upgrading or removing, as chromium needs:$changed"
    say "installing with apt-get install --no-install-recommends chromium, new packages:$new"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium
}

if command -v chromium >/dev/null || command -v chromium-browser >/dev/null; then
    say "chromium is installed"
elif [ "$(id -u)" = 0 ]; then
    install_chromium
else
    say "chromium is missing and this is not root: the browser test will skip (apt-get install chromium as root)"
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
