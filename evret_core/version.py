"""The version of evret_core, in a module of its own so that no module imports the package's face for it."""

__version__ = "0.1.0"
