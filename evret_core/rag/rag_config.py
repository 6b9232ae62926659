"""``RagConfig``: the settings of a RAG evaluation, one typed model for ``evret rag``, TOML files and Python.

The same style as :class:`~evret_core.evaluation.config.EvaluateConfig` (:mod:`evret_core.io.run_config`):
a TOML file (``evret rag --config rag.toml``) holds the same keys as the model, relative paths are relative to the
file, and the parts (``retriever``, ``generator``, ``claim_judge``, ``answer_judge``, ``relevance``,
``retrieval_judge``, ``executor``) are a name or a table with ``name`` and the part's options::

    dataset = "questions.jsonl"
    corpus = "corpus.jsonl"
    conditions = ["gold", "retrieved"]
    retriever = "bm25"
    [generator]
    name = "llm"
    provider = "openai"

In Python::

    from evret_core.rag.rag_config import RagConfig
    results = RagConfig(dataset="questions.jsonl", corpus="corpus.jsonl", generator="extractive",
                        conditions=["gold"]).evaluate()

Over a conversation dataset (``dataset_format = "conversations"`` or ``"mtrag"``, or a ``.jsonl`` whose records
have ``turns``) the questions are the turns labelled for generation (:mod:`evret_core.rag.turns`), and
``query_form``, ``history_turns``, ``history_roles``, ``history_max_words``, ``rewriter``, ``claims_history`` and
``history`` apply (docs/rag.md, "Conversations").

Errors name the file and option (``rag.toml: option 'k': has the wrong type (str)``), the flag (``--seed must be
an integer from 0 to ...``), or the model (``RagConfig: option 'k': ...``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import ValidationInfo, field_validator

from evret_core.contracts import kinds
from evret_core.contracts.errors import EvretError, did_you_mean
from evret_core.conversation.forms import FORMS, HistoryWindow
from evret_core.io.conversation_formats import load_conversations
from evret_core.io.conversations import is_conversation_file
from evret_core.io.mtrag import mtrag_files
from evret_core.io.run_config import ComponentSpec, Config, int_in, relative
from evret_core.limits import MAX_DEPTH, MAX_RESAMPLES, MAX_SEED
from evret_core.plugins import builder
from evret_core.progress import ProgressCallback
from evret_core.rag.pipeline import CLAIMS_HISTORY
from evret_core.rag.turns import HISTORY_SOURCES, turn_questions

if TYPE_CHECKING:
    from evret_core.rag.harness import RagEvaluator
    from evret_core.rag.questions.question_sets import QuestionSet
    from evret_core.results.rag_results import RagResults

__all__ = ["DATASET_FORMATS", "RagConfig", "load_questions"]

DATASET_FORMATS = ("rgb", "conversations", "mtrag")
CONVERSATION_FORMATS = ("conversations", "mtrag")
CONVERSATION_SETTINGS = ("query_form", "history_turns", "history_roles", "history_max_words", "rewriter",
                         "claims_history", "history")
"""The settings that apply to conversation datasets only."""
BUILTIN_CONDITIONS = ("gold", "retrieved")
PARTS = ("retriever", "generator", "claim_judge", "answer_judge", "relevance", "retrieval_judge", "executor")

# setting -> the types a TOML file (or Python) may give it
_TYPES: dict[str, type | tuple[type, ...]] = {
    "dataset": (str, Path), "corpus": (str, Path), "output": (str, Path), "conditions": (list, tuple),
    "k": int, "correct_f1": (int, float), "confidence_level": float, "n_resamples": int, "seed": int,
    "pipelined": bool, "adversarial": (list, tuple), "adversarial_base": str, "cases": (str, Path),
    "write_cases": (str, Path), "dataset_format": str, "query_form": str, "claims_history": str, "history": str,
    "history_roles": str, "history_turns": int, "history_max_words": int,
    **{part: (str, dict, ComponentSpec) for part in PARTS},
}

_BOUNDS = {"k": (1, MAX_DEPTH), "n_resamples": (1, MAX_RESAMPLES), "seed": (0, MAX_SEED),
           "history_turns": (0, 10_000), "history_max_words": (1, 1_000_000)}


class RagConfig(Config):
    """Everything ``evret rag`` needs; see the module docs. Defaults are those of
    :class:`~evret_core.rag.RagEvaluator`."""

    PATHS: ClassVar[tuple[str, ...]] = ("dataset", "corpus", "output", "cases", "write_cases")
    COMPONENTS: ClassVar[tuple[str, ...]] = (*PARTS, "rewriter")
    FLAGS: ClassVar[dict[str, str]] = {
        "dataset": "--dataset", "dataset_format": "--dataset-format", "corpus": "--corpus", "output": "--output",
        "k": "-k", "correct_f1": "--correct-f1", "seed": "--seed", "n_resamples": "--resamples",
        "adversarial_base": "--adversarial-base", "cases": "--cases", "write_cases": "--write-cases",
        "conditions": "--conditions", "adversarial": "--adversarial", "pipelined": "--staged",
        "query_form": "--query-form", "claims_history": "--claims-history", "history": "--history", "history_turns": "--history-turns",
        "history_roles": "--history-roles", "history_max_words": "--history-max-words"}
    FLAG_SEPARATOR: ClassVar[str] = " "
    REQUIRED: ClassVar[tuple[str, ...]] = ("dataset", "generator")

    dataset: str
    generator: ComponentSpec
    corpus: str | None = None
    dataset_format: str | None = None
    output: str | None = None
    retriever: ComponentSpec | None = None
    claim_judge: ComponentSpec = ComponentSpec(name="token-overlap")
    answer_judge: ComponentSpec | None = None
    relevance: ComponentSpec = ComponentSpec(name="lexical")
    retrieval_judge: ComponentSpec | None = None  # None: the default judge (token-overlap), and a note says so
    executor: ComponentSpec | None = None
    conditions: list[str] = ["gold", "retrieved"]
    k: int = 5
    correct_f1: float = 0.5
    confidence_level: float = 0.95
    n_resamples: int = 1000
    seed: int = 0
    pipelined: bool = True
    adversarial: list[str] | None = None
    adversarial_base: str | None = None
    cases: str | None = None
    write_cases: str | None = None
    query_form: str = "last_turn"
    history_turns: int | None = None
    history_roles: str = "user"
    history_max_words: int = 256
    rewriter: ComponentSpec | None = None
    claims_history: str = "all"
    history: str = "reference"

    @field_validator(*_TYPES, mode="before")
    @classmethod
    def _typed(cls, value: Any, info: ValidationInfo) -> Any:
        kind = _TYPES[str(info.field_name)]
        if value is not None and not (isinstance(value, kind) and (kind is bool or not isinstance(value, bool))):
            raise ValueError(f"has the wrong type ({type(value).__name__})")
        if info.field_name in _BOUNDS:  # the type first: k = "five" has the wrong type, k = 0 is out of bounds
            return int_in(*_BOUNDS[str(info.field_name)])(value)
        if isinstance(value, Path):
            return str(value)
        return value

    @field_validator("dataset", "corpus", "output", "cases", "write_cases")
    @classmethod
    def _path(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("the path is empty")
        return value

    @field_validator("conditions", "adversarial", mode="before")
    @classmethod
    def _names(cls, value: Any) -> Any:
        if value is not None and not all(isinstance(c, str) for c in value):
            raise ValueError("must be a list of names such as ['gold', 'retrieved']")
        return None if value is None else list(value)

    @field_validator("dataset_format")
    @classmethod
    def _format(cls, value: str | None) -> str | None:
        if value is not None and value not in DATASET_FORMATS:
            raise ValueError(f"unknown format {value!r}{did_you_mean(value, DATASET_FORMATS)}; use "
                             f"{', '.join(DATASET_FORMATS)}")
        return value

    @field_validator("query_form", "claims_history", "history_roles", "history")
    @classmethod
    def _choice(cls, value: str, info: ValidationInfo) -> str:
        choices = {"query_form": FORMS, "claims_history": CLAIMS_HISTORY,
                   "history_roles": ("user", "all"), "history": HISTORY_SOURCES}[str(info.field_name)]
        if value not in choices:
            raise ValueError(f"unknown value {value!r}{did_you_mean(value, choices)}; use {', '.join(choices)}")
        return value

    @field_validator("correct_f1")
    @classmethod
    def _f1(cls, value: float) -> float:
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"must be a number in [0, 1], got {value!r}")
        return value

    @field_validator("confidence_level")
    @classmethod
    def _level(cls, value: float) -> float:
        if not math.isfinite(value) or not 0 < value < 1:
            raise ValueError(f"must be a number between 0 and 1 (exclusive), e.g. 0.95, got {value!r}")
        return value

    @classmethod
    def file_settings(cls, raw: Any, path: str | Path) -> tuple[dict[str, Any], dict[str, dict[str, str]]]:
        """As :meth:`Config.file_settings`; a generator named by a relative ``.jsonl`` path (an answers file) is
        relative to the file too."""
        data, option_sources = super().file_settings(raw, path)
        generator = data.get("generator")
        name = generator.get("name") if isinstance(generator, dict) else generator
        if isinstance(name, str) and name.lower().endswith(".jsonl"):
            named = relative(Path(path).parent, name)
            data["generator"] = {**generator, "name": named} if isinstance(generator, dict) else named
        return data, option_sources

    # -- the command line ----------------------------------------------------------------------------------------
    @classmethod
    def flag_value(cls, args: Any, key: str) -> Any:
        """As :meth:`Config.flag_value`; ``--conditions`` and ``--adversarial`` are comma-separated names,
        ``--staged`` turns the pipelined run off."""
        value = getattr(args, key, None)
        if key in ("conditions", "adversarial") and value is not None:
            value = [c.strip() for c in value.split(",") if c.strip()]
            if key == "adversarial" and not value:
                raise EvretError("--adversarial: name at least one family, e.g. counterfactual,injection")
        if key == "pipelined":
            value = False if args.staged else None
        return value

    @classmethod
    def default_component(cls, kind: str) -> str | None:
        """As :meth:`Config.default_component`; ``--retrieval-judge-option`` alone goes to the default retrieval
        judge, ``--rewriter-option`` needs ``--rewriter``."""
        if kind == "rewriter":
            return None
        if kind == "retrieval_judge":
            from evret_core.rag.harness import DEFAULT_RETRIEVAL_JUDGE

            return DEFAULT_RETRIEVAL_JUDGE
        return super().default_component(kind)

    # -- building ----------------------------------------------------------------------------------------------
    @property
    def conversation_run(self) -> bool:
        """Whether the dataset is conversations: ``dataset_format`` names a conversation format, or none is given
        and the dataset is a ``.jsonl`` whose first record has ``turns``."""
        if self.dataset_format is not None:
            return self.dataset_format in CONVERSATION_FORMATS
        return is_conversation_file(self.dataset)

    def check_settings(self) -> None:
        """Before any work: the conversation settings given for a dataset of single questions, and a rewriter
        without the ``rewriter`` query form (or the form without a rewriter), are errors naming the flag or
        option."""
        given = [key for key in CONVERSATION_SETTINGS if key in self.model_fields_set]
        if given and not self.conversation_run:
            key = given[0]
            flag = self.FLAGS.get(key, f"--{key.replace('_', '-')}")
            raise EvretError(f"{flag} (setting '{key}') applies to conversation datasets (--dataset-format "
                             f"conversations or mtrag, or a .jsonl of conversations with 'turns')")
        if self.query_form == "rewriter" and self.rewriter is None:
            raise EvretError("--query-form rewriter needs --rewriter NAME (carry-terms, llm or a plugin's)")
        if self.rewriter is not None and self.query_form != "rewriter":
            raise EvretError(f"--rewriter {self.rewriter.name}: the rewriter makes the queries of --query-form "
                             f"rewriter; give it (the query form is {self.query_form})")

    def input_files(self) -> list[str]:
        """The files this run reads (question set, corpus, cases, a precomputed answers file, files named by the
        parts' options, every file of an MTRAG copy): never an output."""
        from evret_core.io.outputs import files_named

        files = [f for f in (self.dataset, self.corpus, self.cases) if f]
        if self.dataset_format == "mtrag":  # the reduced corpus is built from the MTRAG copy's sibling folders
            files += mtrag_files(self.dataset)
        return files + files_named(self.part_values())

    def part_values(self) -> list[Any]:
        """Each part's name and options, for the output guard (a name may be a file: an answers ``.jsonl``)."""
        specs = [getattr(self, part) for part in self.COMPONENTS]
        return [s.name if s else None for s in specs] + [dict(s.options) if s else {} for s in specs]

    def check_output(self, inputs: list[str] | None = None) -> None:
        """Fail now, before any work, when ``output`` or ``write_cases`` cannot be written or would overwrite an
        input (:meth:`input_files`: every file of an MTRAG copy too; see :mod:`evret_core.io.outputs`)."""
        from evret_core.io.outputs import check_outputs

        check_outputs({"--output": self.output, "--write-cases": self.write_cases},
                      inputs=[*self.input_files(), *(inputs or [])], options=self.part_values())

    def load_questions(self) -> QuestionSet:
        """The question set (:func:`load_questions`)."""
        conversations = self.dataset_format is None and self.conversation_run  # a .jsonl of conversations
        return load_questions(self.dataset, self.corpus, "conversations" if conversations else self.dataset_format)

    def run_conditions(self) -> list[Any]:
        """The run's conditions: the named ones, one per adversarial family, and those of the ``cases`` file
        (read now: a bad cases file fails before any work)."""
        conditions: list[Any] = list(self.conditions)
        if self.adversarial:
            from evret_core.rag.perturb.cases import adversarial_conditions

            base = self.adversarial_base or ("retrieved" if self.retriever else "gold")
            conditions += adversarial_conditions(self.adversarial, base=base, seed=self.seed)
        if self.cases:
            from evret_core.rag.perturb.cases import read_cases

            conditions += read_cases(self.cases)
        return conditions

    def score_names(self, conditions: list[Any]) -> list[str]:
        """The gateable scores a run over ``conditions`` can have (``retrieval/recall@5``, ``gold/correct``...)."""
        from evret_core.rag.harness import score_names
        from evret_core.rag.questions.conditions import resolve_conditions

        # no part is built yet: the answer judge's spec stands for the judge (the scores' metrics read only whether
        # there is one, and no score is run)
        return score_names(resolve_conditions(conditions), self.k, relevance=self.relevance.name != "none",
                           answer_judge=self.answer_judge, correct_f1=self.correct_f1)

    def build_retriever(self, questions: QuestionSet) -> Any:
        """The retriever (None without one), over the question set's corpus unless its options name another."""
        spec = self.retriever
        if spec is None:
            return None
        try:
            return builder.build(kinds.RETRIEVER, spec.name, spec.options, sources=spec.sources(),
                                 corpus=questions.corpus or None)
        except EvretError as exc:
            # a .jsonl question set without --corpus: the retriever's own message names its option, not --corpus
            if "corpus" in spec.options or questions.corpus or "corpus" not in str(exc):
                raise
            raise EvretError(f"--retriever {spec.name} has no corpus to index: give --corpus CORPUS.jsonl, the "
                             f"corpus the question set's gold ids point into ({exc})") from None

    def build_evaluator(self, questions: QuestionSet, conditions: list[Any] | None = None,
                        progress: ProgressCallback | None = None) -> RagEvaluator:
        """The retriever, the answer judge and the :class:`~evret_core.rag.RagEvaluator` of this run."""
        from evret_core.rag.harness import RagEvaluator

        retriever = self.build_retriever(questions)
        answer_judge = None
        if self.answer_judge is not None:
            spec = self.answer_judge
            answer_judge = builder.build(kinds.JUDGE, spec.name, spec.options, sources=spec.sources())
        # an option that does not fit names where it was written
        retrieval_judge = None
        if self.retrieval_judge is not None:
            spec = self.retrieval_judge
            retrieval_judge = builder.build(kinds.JUDGE, spec.name, spec.options, sources=spec.sources())
        rewriter = None
        if self.rewriter is not None:
            spec = self.rewriter
            rewriter = builder.build(kinds.REWRITER, spec.name, spec.options, sources=spec.sources())
        return RagEvaluator(
            retriever=retriever, generator=self.generator.name,
            generator_options=dict(self.generator.options) or None,
            conditions=self.run_conditions() if conditions is None else conditions, k=self.k,
            claim_judge=self.claim_judge.name, claim_judge_options=dict(self.claim_judge.options) or None,
            relevance=self.relevance.name, relevance_options=dict(self.relevance.options) or None,
            pipelined=self.pipelined, answer_judge=answer_judge, retrieval_judge=retrieval_judge,
            executor=self.executor.name if self.executor else None,
            executor_options=dict(self.executor.options) or None if self.executor else None,
            correct_f1=self.correct_f1, confidence_level=self.confidence_level, n_resamples=self.n_resamples,
            seed=self.seed, progress=progress, query_form=self.query_form,
            history_window=HistoryWindow(self.history_turns, self.history_roles, self.history_max_words),
            rewriter=rewriter, claims_history=self.claims_history, history=self.history)

    def evaluate(self, progress: ProgressCallback | None = None) -> RagResults:
        """Check the outputs, read the question set, evaluate, and write ``write_cases`` and ``output`` when set."""
        self.check_settings()
        conditions = self.run_conditions()
        self.check_output()
        questions = self.load_questions()
        evaluator = self.build_evaluator(questions, conditions, progress)
        results = evaluator.evaluate(questions)
        self.write(evaluator, questions, results)
        return results

    def write(self, evaluator: RagEvaluator, questions: QuestionSet, results: RagResults) -> None:
        """Write the run's adversarial cases (``write_cases``, recorded in the results' config) and its results
        (``output``)."""
        if self.write_cases:
            from evret_core.rag.perturb.cases import write_cases

            written = {name: column for name, column in evaluator.last_cases.items()
                       if name not in BUILTIN_CONDITIONS}
            results.config["adversarial_cases"] = {"path": self.write_cases,
                                                   "sha256": write_cases(self.write_cases, questions, written)}
        if self.output:
            results.to_json(self.output)


def load_questions(dataset: str, corpus: str | None = None, dataset_format: str | None = None) -> QuestionSet:
    """The question set: by ``dataset_format`` when given (``rgb``; ``conversations`` and ``mtrag``: the turns
    labelled for generation, :func:`~evret_core.rag.turns.turn_questions`), else by the dataset's suffix."""
    from evret_core.rag.questions.question_sets import QuestionSet

    if dataset_format is None:
        return QuestionSet.load(dataset, corpus)
    if dataset_format in CONVERSATION_FORMATS:
        return turn_questions(load_conversations(dataset, corpus=corpus, dataset_format=dataset_format))
    if dataset_format not in DATASET_FORMATS:
        raise EvretError(f"dataset_format: unknown format {dataset_format!r}; use {', '.join(DATASET_FORMATS)}")
    if corpus:
        raise EvretError(f"--dataset-format {dataset_format}: the file carries its own passages; drop --corpus")
    from evret_core.rag.questions.rgb import read_rgb

    return read_rgb(dataset)
