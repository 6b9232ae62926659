"""The plugin host: loading, the registry, recipes and the built-ins."""
