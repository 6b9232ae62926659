"""Errors a user can cause, with messages a person can act on."""

from __future__ import annotations


class EvretError(Exception):
    """A problem with the user's input or configuration.

    The CLI prints the message without a traceback and exits with status 2. Messages name the file, line,
    field or option at fault.
    """


class PluginError(EvretError):
    """A plugin could not be loaded, or two plugins claim the same name."""


class UnknownNameError(EvretError, KeyError):
    """A judge, metric, retriever, evaluator or provider name that no installed plugin registers."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""
