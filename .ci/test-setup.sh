#!/usr/bin/env bash
# Installs what the test suite needs from Debian's packages, when missing. Idempotent.
set -euo pipefail
# headless Chromium renders the HTML report in tests/results/test_html_report.py
command -v chromium >/dev/null || (apt-get update && apt-get install -y chromium)

# evret-pgvector's tests run PostgreSQL (binaries from the pgserver wheel); it refuses to run as root, so as root
# the tests run it as this user.
if [ "$(id -u)" = 0 ] && ! id -u postgres >/dev/null 2>&1; then
    useradd --system --user-group --no-create-home --shell /usr/sbin/nologin postgres
fi

exit 0
