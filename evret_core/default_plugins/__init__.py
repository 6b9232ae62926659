"""Evret's built-ins, registered through the same hooks as third-party plugins."""

BUILTIN_PLUGINS = (
    "evret_core.default_plugins.judges",
    "evret_core.default_plugins.metrics",
    "evret_core.default_plugins.evaluators",
    "evret_core.default_plugins.output_evaluators",
    "evret_core.default_plugins.criteria_judges",
    "evret_core.default_plugins.retrievers",
    "evret_core.default_plugins.executors",
)
