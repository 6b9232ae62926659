"""Deprecated alias: the import paths of modules that moved when the core was laid out by pipeline stage
(docs/architecture.md), kept working.

``import evret_core.stats`` still works and gives the module now at ``evret_core.statistics.inference``, the same
module object, with a ``DeprecationWarning`` that names the new path; a path under an old name that is not listed
(``evret_core.evaluators.config``) raises ModuleNotFoundError. Modules that became packages
(``evret_core.results``, ``evret_core.plugins``, ``evret_core.rag.questions``, ``evret_core.rag.claims``) keep
their old names importable from the package itself.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import warnings
from types import ModuleType
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from importlib.abc import Loader

#: old module path -> the module that holds its code now
MOVED = {
    "evret_core.cache": "evret_core.llm.cache",
    "evret_core.config": "evret_core.evaluation.config",
    "evret_core.context_columns": "evret_core.judge.context_columns",
    "evret_core.contexts": "evret_core.judge.context_columns",
    "evret_core.corpus": "evret_core.data.corpus",
    "evret_core.criteria.base": "evret_core.criteria.shared",
    "evret_core.dataset_files": "evret_core.data.dataset_files",
    "evret_core.default_plugins": "evret_core.plugins.builtins",
    "evret_core.evaluators": "evret_core.evaluation",
    "evret_core.evaluators.judgment_plan": "evret_core.judge.judgment_plan",
    "evret_core.evaluators.llm_score": "evret_core.scoring.llm_score",
    "evret_core.evaluators.output": "evret_core.scoring.output",
    "evret_core.evaluators.retrieval": "evret_core.evaluation.evaluator",
    "evret_core.evaluators.retrieved": "evret_core.retrieve.retrieved",
    "evret_core.evaluators.run_rows": "evret_core.retrieve.run_rows",
    "evret_core.evaluators.text_outputs": "evret_core.scoring.text_outputs",
    "evret_core.executors": "evret_core.evaluation.executors",
    "evret_core.frames": "evret_core.results.frames",
    "evret_core.gates": "evret_core.statistics.gates",
    "evret_core.generate": "evret_core.testsets",
    "evret_core.generate.filters": "evret_core.testsets.filters",
    "evret_core.generate.sampling": "evret_core.testsets.sampling",
    "evret_core.generate.testset": "evret_core.testsets.testset",
    "evret_core.hashing": "evret_core.data.hashing",
    "evret_core.hookspecs": "evret_core.plugins.hookspecs",
    "evret_core.judges": "evret_core.judge",
    "evret_core.judges.base": "evret_core.judge.base",
    "evret_core.judges.cascade": "evret_core.judge.cascade",
    "evret_core.judges.llm": "evret_core.judge.llm",
    "evret_core.judges.normalize": "evret_core.judge.normalize",
    "evret_core.judges.repeats": "evret_core.judge.repeats",
    "evret_core.judges.text": "evret_core.judge.text",
    "evret_core.kinds": "evret_core.plugins.kinds",
    "evret_core.metrics.base": "evret_core.metrics.metric",
    "evret_core.models": "evret_core.data.models",
    "evret_core.outputs": "evret_core.results.outputs",
    "evret_core.per_query": "evret_core.results.per_query",
    "evret_core.queries": "evret_core.data.queries",
    "evret_core.rag.adversarial": "evret_core.rag.perturb.perturbations",
    "evret_core.rag.adversarial_cases": "evret_core.rag.perturb.cases",
    "evret_core.rag.adversarial_scores": "evret_core.rag.scores.adversarial_scores",
    "evret_core.rag.answer_types": "evret_core.rag.perturb.answer_types",
    "evret_core.rag.answers": "evret_core.rag.scores.answers",
    "evret_core.rag.case_texts": "evret_core.rag.questions.case_texts",
    "evret_core.rag.compare": "evret_core.report.rag_compare",
    "evret_core.rag.contexts": "evret_core.rag.questions.conditions",
    "evret_core.rag.counterfactual": "evret_core.rag.perturb.counterfactual",
    "evret_core.rag.document": "evret_core.report.rag_document",
    "evret_core.rag.extractive": "evret_core.rag.generate.extractive",
    "evret_core.rag.generators": "evret_core.rag.generate.generators",
    "evret_core.rag.llm_generator": "evret_core.rag.generate.llm_generator",
    "evret_core.rag.llm_judge": "evret_core.rag.claims.llm_judge",
    "evret_core.rag.relevance": "evret_core.rag.scores.relevance",
    "evret_core.rag.results": "evret_core.results.rag_results",
    "evret_core.rag.rgb": "evret_core.rag.questions.rgb",
    "evret_core.rag.scoring": "evret_core.rag.scores.kind",
    "evret_core.rag.summary": "evret_core.rag.scores.summary",
    "evret_core.rag.tables": "evret_core.report.rag_tables",
    "evret_core.redact": "evret_core.results.redact",
    "evret_core.registry": "evret_core.plugins.registry",
    "evret_core.retrievers": "evret_core.retrieve.retrievers",
    "evret_core.runfiles": "evret_core.data.runfiles",
    "evret_core.stats": "evret_core.statistics.inference",
    "evret_core.testing.claim_judges": "evret_core.testing.claim_judge_suite",
    "evret_core.testing.evaluators": "evret_core.testing.output_evaluator_suite",
    "evret_core.testing.executors": "evret_core.testing.executor_suite",
    "evret_core.testing.generators": "evret_core.testing.generator_suite",
    "evret_core.testing.judges": "evret_core.testing.judge_suite",
    "evret_core.testing.metrics": "evret_core.testing.metric_suite",
    "evret_core.testing.perturbations": "evret_core.testing.perturbation_suite",
    "evret_core.testing.providers": "evret_core.testing.provider_suite",
    "evret_core.testing.rag_scores": "evret_core.testing.rag_score_suite",
    "evret_core.testing.retrieval_evaluators": "evret_core.testing.retrieval_evaluator_suite",
    "evret_core.testing.retrievers": "evret_core.testing.retriever_suite",
    "evret_core.testing.vectorstores": "evret_core.testing.vectorstore_kit",
    "evret_core.vectorstores": "evret_core.retrieve.vectorstores",
}


class _Alias:  # a loader (no importlib.abc base: importing it costs `import evret_core` 5 ms)
    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        warnings.warn(f"{module.__name__} moved to {self.new}; import it from there", DeprecationWarning,
                      stacklevel=2)
        # the import system returns what sys.modules holds under the old name: the real module, not a copy
        sys.modules[module.__name__] = importlib.import_module(self.new)


class MovedModules:  # a meta path finder
    """Finds the old paths of :data:`MOVED`, and only those: any other path under an old package name was never a
    module, and is not found (the old name holds the new package, whose folder would otherwise give a second copy
    of one of its modules under the old name)."""

    def find_spec(self, fullname: str, path: object = None, target: object = None
                  ) -> importlib.machinery.ModuleSpec | None:
        new = MOVED.get(fullname)
        if new is not None:
            return importlib.machinery.ModuleSpec(fullname, cast("Loader", _Alias(new)))
        parent = fullname.rpartition(".")[0]
        while parent:
            if parent in MOVED:
                raise ModuleNotFoundError(f"No module named {fullname!r} ({parent} is the old path of "
                                          f"{MOVED[parent]}, and {fullname} never was a module)", name=fullname)
            parent = parent.rpartition(".")[0]
        return None


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, MovedModules) for finder in sys.meta_path):
        sys.meta_path.insert(0, MovedModules())
