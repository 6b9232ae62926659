"""``ConversationConfig``: the settings of ``evret evaluate`` over a conversation dataset (a JSONL of
conversations with ``turns``, or ``--dataset-format mtrag``), on top of :class:`~evret_core.evaluation.config.
EvaluateConfig`'s: the query forms, the baseline form, the history window, the rewriter and the statistics' unit
and test. In a TOML file the rewriter is a name or a table, as the judge::

    dataset = "conversations.jsonl"
    corpus = "corpus.jsonl"
    metrics = ["ndcg@10", "recall@10"]
    forms = ["last_turn", "rewrite", "rewriter"]
    [retriever]
    name = "bm25"
    [rewriter]
    name = "carry-terms"
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import field_validator

from evret_core.contracts import kinds
from evret_core.contracts.errors import EvretError
from evret_core.conversation.forms import FORMS, HistoryWindow
from evret_core.conversation.turn_evaluator import ConversationEvaluator
from evret_core.evaluation.config import FLAGS, EvaluateConfig
from evret_core.io.conversation_formats import DATASET_FORMATS, load_conversations
from evret_core.io.conversations import ConversationSet, is_conversation_file
from evret_core.io.mtrag import mtrag_files
from evret_core.io.run_config import ComponentSpec, int_in
from evret_core.limits import MAX_RESAMPLES
from evret_core.plugins import builder
from evret_core.results.conversation_results import ConversationResults

__all__ = ["CONVERSATION_FLAGS", "ConversationConfig", "is_conversation_dataset"]

CONVERSATION_FLAGS = {"dataset_format": "--dataset-format", "corpus": "--corpus", "qrels": "--qrels",
                      "forms": "--forms", "baseline_form": "--baseline-form", "history_turns": "--history-turns",
                      "history_roles": "--history-roles", "history_max_words": "--history-max-words",
                      "unit": "--unit", "test": "--test", "all_pairs": "--all-pairs"}
"""The conversation settings' command-line flags (with ``--rewriter`` and ``--rewriter-option``)."""

def is_conversation_dataset(dataset: str | None, dataset_format: str | None) -> bool:
    """Whether ``evret evaluate`` runs over conversations: ``--dataset-format`` names a conversation format, or
    the dataset is a ``.jsonl`` whose first record has ``turns``."""
    if dataset_format is not None:
        return dataset_format in DATASET_FORMATS
    return bool(dataset) and is_conversation_file(str(dataset))


class ConversationConfig(EvaluateConfig):
    """Everything ``evret evaluate`` needs for a conversation dataset; see the module docs."""

    PATHS: ClassVar[tuple[str, ...]] = ("dataset", "output", "corpus", "qrels")
    COMPONENTS: ClassVar[tuple[str, ...]] = ("retriever", "judge", "executor", "rewriter")
    FLAGS: ClassVar[dict[str, str]] = {**FLAGS, **CONVERSATION_FLAGS}

    dataset_format: Literal["conversations", "mtrag"] | None = None
    corpus: str | None = None
    qrels: str | None = None
    forms: list[str] | None = None
    baseline_form: str = "last_turn"
    history_turns: int | None = None
    history_roles: Literal["user", "all"] = "user"
    history_max_words: int = 256
    rewriter: ComponentSpec | None = None
    unit: Literal["conversation", "turn"] = "conversation"
    test: Literal["randomization", "t", "bootstrap"] = "randomization"
    all_pairs: bool = False
    test_resamples: int = 10000

    _check_history_turns = field_validator("history_turns", mode="before")(int_in(0, 10_000))
    _check_max_words = field_validator("history_max_words", mode="before")(int_in(1, 1_000_000))
    _check_test_resamples = field_validator("test_resamples", mode="before")(int_in(1, MAX_RESAMPLES))

    @field_validator("forms", mode="before")
    @classmethod
    def _forms(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [f.strip() for f in value.split(",") if f.strip()]
        if value is not None:
            if not isinstance(value, list) or not value or not all(isinstance(f, str) for f in value):
                raise ValueError(f"must name query forms, e.g. last_turn,rewrite (any of {', '.join(FORMS)})")
            unknown = [f for f in value if f not in FORMS]
            if unknown:
                raise ValueError(f"unknown query form {unknown[0]!r}; use {', '.join(FORMS)}")
            if len(set(value)) != len(value):
                raise ValueError("names a query form twice")
        return value

    @field_validator("baseline_form", mode="before")
    @classmethod
    def _baseline(cls, value: Any) -> Any:
        if value not in FORMS:
            raise ValueError(f"unknown query form {value!r}; use {', '.join(FORMS)}")
        return value

    @field_validator("corpus", "qrels", mode="before")
    @classmethod
    def _file(cls, value: Any) -> Any:
        if isinstance(value, Path):
            value = str(value)
        if isinstance(value, str) and not value.strip():
            raise ValueError("the path is empty")
        return value

    @classmethod
    def layer_args(cls, args: Any, data: dict[str, Any], sources: dict[str, str],
                   option_sources: dict[str, dict[str, str]]) -> None:
        """A conversation run retrieves every form's texts itself: a precomputed ``--run`` has no such queries."""
        if getattr(args, "run", None):
            raise EvretError("--run applies to plain datasets: a conversation run retrieves each turn under each "
                             "query form (give --retriever)")

    @classmethod
    def default_component(cls, kind: str) -> str | None:
        """``--rewriter-option`` needs ``--rewriter``; the others as :class:`EvaluateConfig`."""
        return None if kind == "rewriter" else super().default_component(kind)

    # -- building --------------------------------------------------------------------------------------------
    def input_files(self) -> list[str]:
        """Every file the run reads: the dataset (every file of an MTRAG folder), corpus, qrels, component files."""
        files = super().input_files()
        files += [p for p in (self.corpus, self.qrels) if p]
        if self.dataset_format == "mtrag":  # the reduced corpus is built from the MTRAG copy's sibling folders
            files += mtrag_files(self.dataset)
        return files

    def load_dataset(self) -> ConversationSet:  # type: ignore[override]
        """The conversations, through the conversation readers
        (:func:`~evret_core.io.conversation_formats.load_conversations`: a conversation JSONL or MTRAG), with
        ``corpus`` and ``qrels`` when given."""
        return load_conversations(self.dataset, corpus=self.corpus, qrels=self.qrels,
                                  dataset_format=self.dataset_format)

    def build_rewriter(self) -> Any:
        """The rewriter object, or None."""
        if self.rewriter is None:
            return None
        return builder.build(kinds.REWRITER, self.rewriter.name, self.rewriter.options,
                             sources=self.rewriter.sources())

    def build_conversation_evaluator(self, dataset: ConversationSet,
                                     progress: Callable[[str, int, int], None] | None = None
                                     ) -> ConversationEvaluator:
        """The retrieval evaluator (its retriever handed ``dataset``: it holds the corpus), then the conversation
        evaluator around it."""
        evaluator = self.build_evaluator(dataset, progress)  # type: ignore[arg-type]
        return ConversationEvaluator(
            evaluator, forms=self.forms, baseline_form=self.baseline_form,
            window=HistoryWindow(self.history_turns, self.history_roles, self.history_max_words),
            rewriter=self.build_rewriter(), unit=self.unit, test=self.test, all_pairs=self.all_pairs,
            confidence_level=self.confidence_level, n_resamples=self.n_resamples, test_resamples=self.test_resamples,
            seed=self.seed, min_slice_size=self.min_slice_size, progress=progress)

    def score_names(self) -> list[str]:
        """The ``form/metric`` names the run computes (what gates may name)."""
        forms = self.forms or [f for f in FORMS if self.rewriter is not None or f != "rewriter"]
        return [f"{form}/{metric}" for form in forms for metric in self.metrics]

    def evaluate(self, progress: Callable[[str, int, int], None] | None = None) -> ConversationResults:  # type: ignore[override]
        """Check the output path, load the conversations, run every form, and write ``output`` when it is set."""
        self.check_output()
        dataset = self.load_dataset()
        results = self.build_conversation_evaluator(dataset, progress).evaluate(dataset)
        if self.output:
            results.to_json(self.output)
        return results
