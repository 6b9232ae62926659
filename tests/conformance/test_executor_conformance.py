"""The built-in ``local`` executor passes the executor conformance suite."""

from __future__ import annotations

import pytest

from evret_core.evaluation.executors import LocalExecutor
from evret_core.testing import ExecutorConformance


class TestLocalExecutorConformance(ExecutorConformance):

    @pytest.fixture
    def executor(self) -> LocalExecutor:
        return LocalExecutor()
