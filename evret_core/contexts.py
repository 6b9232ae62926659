"""Deprecated alias: the judgment-context columns moved to :mod:`evret_core.context_columns` (one module name per
module: ``evret_core.rag.contexts`` is the RAG harness's context conditions). Importing this module warns."""

import warnings

from evret_core.context_columns import AnswerKey, ContextColumns

warnings.warn("evret_core.contexts is deprecated: import ContextColumns from evret_core.context_columns "
              "(or evret_core.sdk)", DeprecationWarning, stacklevel=2)

__all__ = ["AnswerKey", "ContextColumns"]
