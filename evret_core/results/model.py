"""The one results model of retrieval and RAG runs: `Results`, the base of both kinds, and `ScoreView`, their scores
in one shape.

:class:`~evret_core.results.evaluation.EvaluationResults` (retrieval) and
:class:`~evret_core.results.rag_results.RagResults` (RAG) each keep their own JSON schema (``docs/results.md``,
``docs/rag.md``); what they share lives here once: reading a results document (file or text, with errors that name
the file: :func:`~evret_core.io.jsonio.read_document`), the schema version check, validation errors as one line,
writing through the one output guard (:func:`~evret_core.io.outputs.write_output`) after the one redaction rule
(:func:`redact_sections`), the numbers a file may hold (finite, in range, intervals
``[low, high]``), and :meth:`Results.score_view`, the scores every reader (gates, ``evret compare``, tracking)
uses. :func:`evret_core.results.files.load_results` reads either kind.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ValidationError

from evret_core.contracts.errors import EvretError, describe_validation_error
from evret_core.io.jsonio import read_document
from evret_core.io.outputs import write_output
from evret_core.io.redact import redact

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["SECTIONS", "Results", "ScoreView", "ValueCheck", "metric_value_range", "redact_sections"]

# a stored mean may differ from the mean recomputed here by summation order only
MEAN_TOLERANCE = 1e-9
# a value just outside its range by rounding is still in it
RANGE_TOLERANCE = 1e-9


@dataclass
class ScoreView:
    """A run's scores in one shape, whatever its kind: ``scores`` (name -> mean), ``intervals`` (name ->
    ``[low, high]``) and ``per_query`` (query or question id -> name -> value, the values that apply to it).
    Retrieval names are metrics (``recall@5``); RAG names are ``SECTION/METRIC`` (``retrieval/recall@5``,
    ``gold/f1``). The regression gates, ``evret compare`` and experiment tracking read runs through it."""

    scores: dict[str, float]
    intervals: dict[str, list[float]]
    per_query: dict[str, dict[str, float]]

    def per_query_scores(self) -> dict[str, dict[str, float]]:
        return self.per_query


def metric_value_range(name: str) -> tuple[float, float] | None:
    """The [low, high] that every per-query value of metric ``name`` lies in (``recall@5``: [0, 1]), or None when
    the metric does not say or cannot be created here (a plugin's metric that is not installed)."""
    from evret_core.plugins.registry import create_metric

    try:
        bounds = getattr(create_metric(name), "value_range", None)
    except EvretError:
        return None
    return (float(bounds[0]), float(bounds[1])) if bounds is not None else None


DAMAGED = "the file was edited or damaged (re-run the evaluation)"
"""How every error about a number Evret cannot have written ends."""


def _shown(value: Any) -> str:
    """A number as the error shows it (``5.0``, ``nan``), anything else as its repr."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return repr(float(value))
    return repr(value)


class ValueCheck:
    """The checks of the numbers in a results file, with errors naming ``source``, where the number is and its
    name: finite values inside their range (``bounds(name)``, None for any finite value), means equal to the mean
    of their per-query values (within :data:`MEAN_TOLERANCE`), intervals ``[low, high]`` with finite
    ``low <= high``, counts, confidence levels. Plain checks of single values: a reader that streams a file calls
    them as it goes."""

    def __init__(self, source: str, bounds: Any = metric_value_range, unit: str = "query") -> None:
        self.source = source
        self._bounds = bounds
        self._ranges: dict[str, tuple[float, float] | None] = {}
        self.unit = unit  # what the per-record values are of: "query" (retrieval) or "question" (RAG)

    def fail(self, problem: str) -> EvretError:
        """The error for ``problem`` (``where: what``) in this file."""
        return EvretError(f"{self.source}: {problem}; {DAMAGED}")

    def bounds(self, name: str) -> tuple[float, float] | None:
        if name not in self._ranges:
            self._ranges[name] = self._bounds(name)
        return self._ranges[name]

    def value(self, value: float, name: str, where: str) -> None:
        if not math.isfinite(value):
            raise self.fail(f"{where}: {name} is {value!r}, not a finite number")
        limits = self.bounds(name)
        if limits is not None and not limits[0] - RANGE_TOLERANCE <= value <= limits[1] + RANGE_TOLERANCE:
            raise self.fail(f"{where}: {name} is {value!r}, outside [{limits[0]:g}, {limits[1]:g}], the range of "
                            f"{name}")

    def first_bad(self, values: Any, name: str, present: Any) -> int | None:
        """The first index of the numpy array ``values`` (where ``present``) that :meth:`value` refuses, or None:
        the same test over a column at once."""
        import numpy as np

        with np.errstate(invalid="ignore"):
            good = np.isfinite(values)
            limits = self.bounds(name)
            if limits is not None:
                good &= (values >= limits[0] - RANGE_TOLERANCE) & (values <= limits[1] + RANGE_TOLERANCE)
        bad = np.flatnonzero(present & ~good)
        return int(bad[0]) if len(bad) else None

    def number(self, value: Any, where: str, limits: tuple[float, float] | None = None) -> float:
        """``value`` as a float: a finite number (not a bool nor a string) inside ``limits`` when given."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(f"{where} is {value!r}, not a number")
        if not math.isfinite(value):
            raise self.fail(f"{where} is {value!r}, not a finite number")
        if limits is not None and not limits[0] - RANGE_TOLERANCE <= value <= limits[1] + RANGE_TOLERANCE:
            raise self.fail(f"{where} is {value!r}, outside [{limits[0]:g}, {limits[1]:g}]")
        return float(value)

    def count(self, value: Any, where: str, high: int | None = None) -> int:
        """``value`` as an int: a whole number from 0 (to ``high`` when given)."""
        if isinstance(value, bool) or not isinstance(value, int) or value < 0 or (high is not None and value > high):
            limits = f"from 0 to {high}" if high is not None else "from 0 up"
            raise self.fail(f"{where} is {value!r}; a count is a whole number {limits}")
        return value

    def level(self, value: Any, where: str) -> float:
        """``value`` as a confidence level: a number strictly between 0 and 1."""
        number = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan
        if not 0.0 < number < 1.0:
            raise self.fail(f"{where} is {_shown(value)}; a confidence level lies strictly between 0 and 1")
        return number

    def agree(self, stored: float, expected: float, where: str, what: str) -> None:
        """``stored`` equals ``expected`` (recomputed here, ``what`` says how) within :data:`MEAN_TOLERANCE`."""
        if not abs(stored - expected) <= MEAN_TOLERANCE * max(1.0, abs(expected)):
            raise self.fail(f"{where} is {stored!r} but {what} is {expected!r}")

    def mean(self, stored: float, values: Sequence[float], name: str, where: str, total: int | None = None) -> None:
        """``stored`` is the mean of ``values`` (or, with ``total``, their sum over ``total``: the queries without
        a value counted as 0, as a retrieval writer may choose); a mean with no values at all was never computed."""
        if not values:
            raise self.fail(f"{where} is {stored!r} but no {self.unit} holds {name}")
        present = math.fsum(values) / len(values)
        candidates = [present] if total is None or not total else [present, math.fsum(values) / total]
        if not any(math.isfinite(m) and abs(stored - m) <= MEAN_TOLERANCE * max(1.0, abs(m)) for m in candidates):
            raise self.fail(f"{where} is {stored!r} but the mean of its {len(values)} per-{self.unit} values is "
                            f"{present!r}")

    def interval(self, interval: Sequence[float], name: str, where: str, in_range: bool = True) -> None:
        if len(interval) != 2 or not all(math.isfinite(x) for x in interval) or not interval[0] <= interval[1]:
            raise EvretError(f"{self.source}: {where} is {list(interval)!r}; an interval is [low, high] with finite "
                             f"low <= high (the file was edited or damaged)")
        if in_range:
            for x in interval:
                self.value(x, name, where)

    def pair(self, value: Any, where: str, limits: tuple[float, float] | None = None) -> tuple[float, float]:
        """``value`` as an interval ``[low, high]`` of finite numbers, ``low <= high``, inside ``limits``."""
        if (not isinstance(value, list) or len(value) != 2
                or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in value)):
            raise self.fail(f"{where} is {value!r}; an interval is [low, high]")
        self.interval(value, where, where, in_range=False)
        low, high = float(value[0]), float(value[1])
        if limits is not None and not (limits[0] - RANGE_TOLERANCE <= low and high <= limits[1] + RANGE_TOLERANCE):
            raise self.fail(f"{where} is {value!r}, outside [{limits[0]:g}, {limits[1]:g}]")
        return low, high

    def table(self, value: Any, where: str) -> dict[str, Any]:
        """``value`` when it is a JSON object (a dict), else the error."""
        if not isinstance(value, dict):
            raise self.fail(f"{where} is {value!r}, not a table")
        return value


SECTIONS = ("config", "stats", "manifest")
"""The sections of a results document that describe the run (options, URLs, error messages) rather than its data:
what :func:`redact_sections` redacts before any file is written."""


def redact_sections(document: dict[str, Any], sections: Sequence[str] = SECTIONS) -> dict[str, Any]:
    """A shallow copy of ``document`` (a results file's top-level object) with its ``sections`` redacted; the data
    (per-query texts, scores) is written as it is. Every writer of a results-like file calls this."""
    return {key: redact(value) if key in sections else value for key, value in document.items()}


class Results(BaseModel):
    """What retrieval and RAG results share (see the module docs); the fields (``schema_version``, ``config``,
    ``stats``...) are declared by each kind, in the order of its JSON schema."""

    KIND: ClassVar[str] = "results"
    """``retrieval`` or ``rag``."""
    LABEL: ClassVar[str] = "results"
    """How errors name a file of this kind (``results``, ``RAG results``)."""
    SCHEMA_VERSION: ClassVar[int] = 0
    """The newest schema version this Evret writes and reads."""
    TEXT_SOURCE: ClassVar[str] = "<json>"
    """How errors name a document given as text."""

    if TYPE_CHECKING:
        schema_version: int
        config: dict[str, Any]
        stats: dict[str, Any]

    # -- what every kind provides -------------------------------------------------------------------------------
    def score_view(self) -> ScoreView:
        """The run's scores, intervals and per-query values under the names gates and comparisons use."""
        raise NotImplementedError

    def manifest_dict(self) -> dict[str, Any]:
        """What reproduces the run, redacted, as a plain dict (versions, settings, dataset, seed, platform)."""
        raise NotImplementedError

    def iter_json(self, indent: int | None = 2) -> Iterator[str]:
        """The results JSON in chunks, redacted by :meth:`redacted_sections`, ending with a newline."""
        raise NotImplementedError

    @classmethod
    def check_document(cls, data: Any, source: str) -> None:
        """An :class:`EvretError` naming ``source`` when ``data`` is not a document of this kind."""
        raise NotImplementedError

    def check_values(self, source: str) -> None:
        """An :class:`EvretError` naming ``source``, the query and the score when a number cannot be what Evret
        wrote (NaN, out of range, a mean that is not the mean of its per-query values, a broken interval)."""

    # -- shared -------------------------------------------------------------------------------------------------
    @property
    def elapsed_s(self) -> float | None:
        """Seconds the run took (``stats["elapsed_s"]``), or None when the file does not say."""
        value = self.stats.get("elapsed_s")
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    def redacted_sections(self, document: dict[str, Any]) -> dict[str, Any]:
        """``document`` (a dump of these results) with ``config``, ``stats`` and ``manifest`` passed through the
        one redaction rule: keys and URL credentials never reach a results file, whoever built the results."""
        return redact_sections(document)

    def redacted(self) -> Self:
        """A shallow copy with ``config`` and ``stats`` (and a manifest) redacted, as for a results file written
        before redaction existed, before it goes into a report or a tracking server."""
        return self.model_copy(update={"config": redact(self.config), "stats": redact(self.stats)})

    def write(self, path: str | Path, indent: int | None = 2) -> None:
        """Stream the results JSON to ``path`` through the output guard (atomically: all or nothing)."""
        write_output(Path(path), self.iter_json(indent))

    def json_text(self, indent: int | None = 2) -> str:
        """The results JSON as one string (no trailing newline)."""
        return "".join(self.iter_json(indent)).rstrip("\n")

    @classmethod
    def from_json(cls, path_or_text: str | Path) -> Self:
        """Read results written by ``to_json`` (a path, or the JSON text itself); the file must be of this kind
        (:func:`evret_core.results.files.load_results` reads either)."""
        data, source = read_document(path_or_text, f"{cls.LABEL} file", cls.TEXT_SOURCE)
        return cls.from_document(data, source)

    @classmethod
    def from_document(cls, data: Any, source: str) -> Self:
        """Results of this kind from a parsed results document: its kind and schema version checked, validated,
        and its numbers checked (:meth:`check_values`); every error names ``source``."""
        cls.check_document(data, source)
        version = data.get("schema_version", 1)
        if not isinstance(version, int) or version > cls.SCHEMA_VERSION:
            raise EvretError(f"{source}: {cls.LABEL} schema_version {version!r} is newer than this Evret reads "
                             f"({cls.SCHEMA_VERSION}); upgrade evret-core")
        try:
            results = cls.model_validate(data)
        except ValidationError as exc:  # one line naming the file and the field
            raise EvretError(cls.validation_message(source, describe_validation_error(exc))) from None
        results.check_values(source)
        return results

    @classmethod
    def validation_message(cls, source: str, problem: str) -> str:
        return f"{source}: not an Evret {cls.LABEL} file ({problem})"
