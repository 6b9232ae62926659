"""The plugin host: the kinds table, hookspecs, loading, the registry and the built-ins."""
