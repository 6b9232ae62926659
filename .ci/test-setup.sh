#!/usr/bin/env bash
# Installs what the test suite needs beyond Python packages, when missing, and says what it does. Idempotent.
# Needs root for both steps (apt-get, useradd); without root it only reports what is missing, and the tests that
# need it skip outside CI (in CI, CI=true, they fail instead).
set -euo pipefail
say() { echo "test-setup: $*"; }

# headless Chromium renders the HTML report in tests/results/test_html_report.py
if command -v chromium >/dev/null || command -v chromium-browser >/dev/null; then
    say "chromium is installed"
elif [ "$(id -u)" = 0 ]; then
    say "installing chromium with apt-get (system package, for the HTML report's browser test)"
    apt-get update && apt-get install -y chromium
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
