"""Haystack sends anonymous usage events (PostHog) when a pipeline runs and writes ~/.haystack/config.yaml, unless
HAYSTACK_TELEMETRY_ENABLED is off when haystack is first imported. Tests must not reach the network or write to the
home folder, so it is turned off for this test process before any test module imports haystack (conftest files are
imported at collection). A user's own setting wins."""

from __future__ import annotations

import os

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")
