"""Helpers for testing Evret and its plugins: stub servers and conformance suites (no SDK imported here)."""
