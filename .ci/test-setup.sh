#!/usr/bin/env bash
# Installs what the test suite needs from Debian's packages, when missing. Idempotent.
set -euo pipefail
# headless Chromium renders the HTML report in tests/results/test_html_report.py
command -v chromium >/dev/null || (apt-get update && apt-get install -y chromium)
exit 0
