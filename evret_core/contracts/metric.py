"""Metric contract and the array form that every metric is computed on.

Every metric is computed on a :class:`RankedBatch`: for ``n`` queries and a depth ``D``, the judged grade of the
document at each rank (NaN where unjudged or past the end of the ranking), every judged grade of each query (for
the ideal ranking, the number of relevant and of judged non-relevant documents) and how many documents each
query retrieved. The same arrays serve one query (``score``) and a whole run (``compute``), so there is one
implementation of each formula. numpy is imported inside the functions that compute, so importing this module loads
none.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import cached_property
from itertools import chain, compress
from operator import getitem, is_
from typing import TYPE_CHECKING, Any

from evret_core.contracts.errors import EvretError

if TYPE_CHECKING:
    import numpy as np

Relevance = Mapping[str, float] | Iterable[str]

_NAN = float("nan")


class RankedBatch:
    """Per-query judged grades along the ranking, padded to a common depth, plus each query's judgments.

    - ``grades[q, r]``: grade of the document at rank ``r`` (0-based) of query ``q``; NaN when that document is
      unjudged or the ranking is shorter than ``r + 1``.
    - ``qrel_grades[q, j]``: every judged grade of query ``q``, sorted descending, NaN-padded.
    - ``num_ret[q]``: how many documents query ``q`` retrieved (the whole ranking, even past ``depth``).
    - ``relevance_level``: a document is relevant when its grade is >= this level; None means grade > 0
      (trec_eval's default for integer grades, i.e. ``-l 1``).
    - ``answers_found[q, r]`` and ``num_answers[q]`` (optional, the *answer coverage*): for queries whose recall
      counts expected answers rather than relevant documents (``any_match`` text labels), how many answers are
      found for the first time at rank ``r``, and how many the query expects; ``num_answers`` is 0 on the other
      rows. Recall-like metrics read it through :meth:`recall_counts`, so a plugin's variant gets the same counts.

    Derived arrays (``relevant``, ``judged_nonrel``, ``gains``, ``ideal``, ``num_rel``, ``num_nonrel``) are
    computed once, on first use.
    """

    def __init__(
        self,
        grades: np.ndarray,
        qrel_grades: np.ndarray,
        num_ret: np.ndarray,
        relevance_level: float | None = None,
        *,
        answers_found: np.ndarray | None = None,
        num_answers: np.ndarray | None = None,
    ) -> None:
        import numpy as np

        grades = np.asarray(grades, dtype=np.float64)
        qrel_grades = np.asarray(qrel_grades, dtype=np.float64)
        if grades.ndim != 2 or qrel_grades.ndim != 2:
            raise EvretError("RankedBatch: grades and qrel_grades must be 2-d arrays (queries x ranks)")
        if grades.shape[0] != qrel_grades.shape[0] or len(num_ret) != grades.shape[0]:
            raise EvretError(
                f"RankedBatch: {grades.shape[0]} ranked rows, {qrel_grades.shape[0]} judgment rows and "
                f"{len(num_ret)} num_ret values must agree"
            )
        self.grades = grades
        self.qrel_grades = qrel_grades
        self.num_ret = np.asarray(num_ret, dtype=np.int64)
        self.relevance_level = None if relevance_level is None else float(relevance_level)
        self.answers_found: np.ndarray | None = None
        self.num_answers: np.ndarray | None = None
        if answers_found is not None or num_answers is not None:
            self.set_answer_coverage(answers_found, num_answers)

    def set_answer_coverage(self, answers_found: np.ndarray | None, num_answers: np.ndarray | None) -> RankedBatch:
        """Attach the answer coverage (see the class docs); returns the batch."""
        import numpy as np

        if answers_found is None or num_answers is None:
            raise EvretError("RankedBatch: answers_found and num_answers go together")
        found = np.asarray(answers_found, dtype=np.float64)
        total = np.asarray(num_answers, dtype=np.float64)
        if found.ndim != 2 or found.shape[0] != self.n_queries or total.shape != (self.n_queries,):
            raise EvretError(f"RankedBatch: answer coverage of shape {found.shape} / {total.shape} does not fit "
                             f"{self.n_queries} queries")
        self.answers_found, self.num_answers = found, total
        return self

    def recall_counts(self, k: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Per query: relevant items found in the top ``k`` (all ranks when None) and relevant items in all.

        Relevant documents and judged relevant documents, except on rows with answer coverage, where they are the
        expected answers found and expected. Recall is their ratio.
        """
        import numpy as np

        found = np.asarray(cut(self.relevant, k).sum(axis=1), dtype=np.float64)
        total = np.asarray(self.num_rel, dtype=np.float64)
        if self.answers_found is not None and self.num_answers is not None:
            by_answers = self.num_answers > 0
            if by_answers.any():
                covered = cut(self.answers_found, k).sum(axis=1)
                found = np.where(by_answers, covered, found)
                total = np.where(by_answers, self.num_answers, total)
        return found, total

    @property
    def n_queries(self) -> int:
        return int(self.grades.shape[0])

    @property
    def depth(self) -> int:
        return int(self.grades.shape[1])

    def _is_rel(self, grades: np.ndarray) -> np.ndarray:
        import numpy as np

        with np.errstate(invalid="ignore"):
            if self.relevance_level is None:
                return np.asarray(grades > 0)
            return np.asarray(grades >= self.relevance_level)

    @cached_property
    def relevant(self) -> np.ndarray:
        """True where the document at that rank is relevant."""
        return self._is_rel(self.grades)

    @cached_property
    def judged_nonrel(self) -> np.ndarray:
        """True where the document at that rank is judged non-relevant with a grade >= 0 (what bpref counts: a
        negative grade is trec_eval's "in the pool but unjudged", or not in the pool, and counts as neither)."""
        import numpy as np

        with np.errstate(invalid="ignore"):
            return np.asarray((self.grades >= 0) & ~self.relevant)

    @cached_property
    def gains(self) -> np.ndarray:
        """The grade as gain where positive, 0 elsewhere (unjudged, non-relevant, negative, padding)."""
        import numpy as np

        return np.asarray(np.fmax(self.grades, 0.0))  # fmax maps NaN (unjudged, padding) to 0

    @cached_property
    def ideal(self) -> np.ndarray:
        """Positive judged grades of each query, sorted descending, 0-padded: the ideal ranking's gains."""
        import numpy as np

        return np.asarray(np.fmax(self.qrel_grades, 0.0))

    @cached_property
    def num_rel(self) -> np.ndarray:
        """Number of relevant judged documents per query."""
        import numpy as np

        return np.asarray(self._is_rel(self.qrel_grades).sum(axis=1))

    @cached_property
    def num_nonrel(self) -> np.ndarray:
        """Number of judged non-relevant documents per query, those with a grade >= 0 (as :attr:`judged_nonrel`)."""
        import numpy as np

        with np.errstate(invalid="ignore"):
            return np.asarray(((self.qrel_grades >= 0) & ~self._is_rel(self.qrel_grades)).sum(axis=1))

    @cached_property
    def num_rel_ret(self) -> np.ndarray:
        """Relevant documents retrieved (at any rank within ``depth``)."""
        import numpy as np

        return np.asarray(self.relevant.sum(axis=1))

    def __getitem__(self, rows: slice | np.ndarray) -> RankedBatch:
        part = RankedBatch(self.grades[rows], self.qrel_grades[rows], self.num_ret[rows], self.relevance_level)
        if self.answers_found is not None and self.num_answers is not None:
            part.set_answer_coverage(self.answers_found[rows], self.num_answers[rows])
        return part

    # -- construction ------------------------------------------------------------------------------------------
    @classmethod
    def from_rankings(
        cls,
        rankings: Sequence[Sequence[str]],
        qrels: Sequence[Relevance],
        relevance_level: float | None = None,
        *,
        depth: int | None = None,
        duplicates: str = "first",
        query_ids: Sequence[str] | None = None,
    ) -> RankedBatch:
        """Build the arrays from ranked id lists and, per query, judged ids (a list, or a mapping id -> grade).

        ``duplicates="first"``: a document retrieved twice counts at its best rank, later copies are unjudged;
        ``"error"``: a duplicate raises an :class:`EvretError` naming the query (``query_ids``) and document.
        ``depth`` keeps only the top ``depth`` ranks in the arrays (``num_ret`` still counts every document).
        """
        import numpy as np

        if len(rankings) != len(qrels):
            raise EvretError(f"{len(rankings)} rankings but {len(qrels)} relevance sets")
        if duplicates not in ("first", "error"):
            raise EvretError(f"duplicates must be 'first' or 'error', got {duplicates!r}")
        grade_maps = [_as_grades(r) for r in qrels]
        n = len(rankings)
        lengths = np.fromiter(map(len, rankings), dtype=np.int64, count=n)
        qrel_lengths = np.fromiter(map(len, grade_maps), dtype=np.int64, count=n)
        n_judged = int(qrel_lengths.sum())
        ranks = _judged_ranks(rankings, lengths, grade_maps, qrel_lengths, duplicates, query_ids)
        qrel_flat = _flat_values(grade_maps, n_judged)
        rows = np.repeat(np.arange(n), qrel_lengths)
        width = int(lengths.max()) if n else 0
        if depth is not None:
            width = min(width, depth)
        return cls.from_positions(rows, ranks, qrel_flat, qrel_lengths, lengths, width, relevance_level)

    @classmethod
    def from_positions(
        cls,
        rows: np.ndarray,
        ranks: np.ndarray,
        qrel_flat: np.ndarray,
        qrel_lengths: np.ndarray,
        num_ret: np.ndarray,
        width: int,
        relevance_level: float | None = None,
    ) -> RankedBatch:
        """Build the arrays from every judgment (query row, 0-based rank or -1 when not retrieved, grade).

        The judgments are laid out query by query (``qrel_lengths[q]`` consecutive entries for query ``q``).
        """
        import numpy as np

        n = len(num_ret)
        grades = np.full((n, width), np.nan)
        keep = (ranks >= 0) & (ranks < width)
        grades[rows[keep], ranks[keep]] = qrel_flat[keep]
        return cls(grades, _sorted_rows(qrel_flat, qrel_lengths), num_ret, relevance_level)


def _judged_ranks(
    rankings: Sequence[Sequence[str]],
    lengths: np.ndarray,
    grade_maps: Sequence[Mapping[str, float]],
    qrel_lengths: np.ndarray,
    duplicates: str,
    query_ids: Sequence[str] | None,
) -> np.ndarray:
    """The 0-based rank of every judged document's first copy (-1 when not retrieved), judgments in qrels order.

    Documents are matched by their Python hash in numpy (one C-level ``hash`` per id, no dict per ranking), then
    every match is confirmed by string equality, so a hash collision can only cost time, never a wrong rank.
    """
    import numpy as np

    n = len(rankings)
    total, width = int(lengths.sum()), int(lengths.max()) if n else 0
    n_judged = int(qrel_lengths.sum())
    doc_hashes = np.fromiter(map(hash, chain.from_iterable(rankings)), dtype=np.int64, count=total)
    ragged = bool(n) and not (lengths == width).all()
    # padding: distinct values per column, so padding never looks like a duplicate (any real clash is confirmed)
    matrix = pad_rows(doc_hashes, lengths, width, 0, dtype=np.int64)
    valid = np.arange(width) < lengths[:, None]
    if ragged:
        matrix[~valid] = np.broadcast_to(np.iinfo(np.int64).min + np.arange(width), matrix.shape)[~valid]
    if duplicates == "error" and width > 1:
        ordered = np.sort(matrix, axis=1)
        for q in np.flatnonzero((ordered[:, 1:] == ordered[:, :-1]).any(axis=1)).tolist():
            seen: set[str] = set()
            for doc in rankings[q]:
                if doc in seen:
                    who = query_ids[q] if query_ids is not None else f"#{q}"
                    raise EvretError(f"query {who}: document {doc!r} is ranked more than once")
                seen.add(doc)
    ranks = np.full(n_judged, -1, dtype=np.int64)
    if not n_judged or not width:
        return ranks
    judged_hashes = np.fromiter(map(hash, chain.from_iterable(grade_maps)), dtype=np.int64, count=n_judged)
    rows = np.repeat(np.arange(n), qrel_lengths)
    block = max((1 << 17) // width, 1)
    for start in range(0, n_judged, block):
        sl = slice(start, start + block)
        same = matrix[rows[sl]] == judged_hashes[sl, None]
        if ragged:
            same &= valid[rows[sl]]
        ranks[sl] = np.where(same.any(axis=1), same.argmax(axis=1), -1)
    found = np.flatnonzero(ranks >= 0)
    judged_docs = list(chain.from_iterable(grade_maps))
    # confirm each match: the same object (no need to read the string, often the case) or an equal string
    at_rank = list(map(getitem, map(rankings.__getitem__, rows[found].tolist()), ranks[found].tolist()))
    claimed = list(map(judged_docs.__getitem__, found.tolist()))
    same = np.fromiter(map(is_, at_rank, claimed), dtype=bool, count=found.size)
    wrong = [i for i, doc, want in zip(found[~same].tolist(), compress(at_rank, ~same), compress(claimed, ~same),
                                       strict=True) if doc != want]
    for i in wrong:  # a hash collision: find the document the slow way
        ranking = rankings[int(rows[i])]
        ranks[i] = next((r for r, doc in enumerate(ranking) if doc == judged_docs[i]), -1)
    return ranks


def _flat_values(grade_maps: Sequence[Mapping[str, float]], total: int) -> np.ndarray:
    import numpy as np

    try:
        return np.fromiter(chain.from_iterable(g.values() for g in grade_maps), dtype=np.float64, count=total)
    except (TypeError, ValueError):
        for g in grade_maps:
            for doc, grade in g.items():
                try:
                    float(grade)
                except (TypeError, ValueError):
                    raise EvretError(f"qrels: document {doc!r} has a non-numeric grade {grade!r}") from None
        raise


def _sorted_rows(flat: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Each query's judged grades sorted descending, NaN-padded: an (n, max judged) matrix."""
    import numpy as np

    width = max(int(lengths.max()) if len(lengths) else 0, 1)
    matrix = pad_rows(flat, lengths, width, -np.inf)
    matrix = -np.sort(-matrix, axis=1)
    matrix[np.arange(width) >= lengths[:, None]] = np.nan
    return matrix


def pad_rows(
    flat: np.ndarray, lengths: np.ndarray, width: int, fill: float, dtype: Any = "float64"
) -> np.ndarray:
    """Lay a flat array of consecutive rows (``lengths[i]`` values each) into an (n, width) matrix."""
    import numpy as np

    n = len(lengths)
    if n and (lengths == width).all():
        return flat.reshape(n, width)
    out = np.full((n, width), fill, dtype=dtype)
    if flat.size:
        rows = np.repeat(np.arange(n), lengths)
        starts = np.cumsum(lengths) - lengths
        cols = np.arange(flat.size) - np.repeat(starts, lengths)
        out[rows, cols] = flat
    return out


def _as_grades(relevant: Relevance) -> Mapping[str, float]:
    if type(relevant) is dict or isinstance(relevant, Mapping):
        return relevant
    return {str(doc): 1.0 for doc in relevant}


class Metric:
    """One IR measure, optionally cut off at rank ``k``; named ``family@k`` (or ``family`` without a cutoff).

    Subclasses set ``family`` and implement :meth:`compute`, vectorised over queries. ``k=None`` means the whole
    ranking for families that allow it; families that need a cutoff set ``requires_k``.
    """

    family: str = "metric"
    requires_k: bool = False
    allows_k: bool = True
    higher_is_better: bool = True
    #: the trec_eval measure this equals (``{k}`` is replaced by the cutoff), or None when trec_eval has none
    trec_name: str | None = None
    trec_name_k: str | None = None
    #: the [low, high] every per-query value lies in (None: unknown, e.g. a plugin's metric that does not say);
    #: results files read back are checked against it, and prediction-powered intervals are clipped to it
    value_range: tuple[float, float] | None = None

    def __init__(self, k: int | None = None) -> None:
        if k is not None:
            if not self.allows_k:
                raise EvretError(f"metric {self.family!r} takes no cutoff: write {self.family}, not {self.family}@{k}")
            try:
                k = int(k)
            except (TypeError, ValueError):
                raise EvretError(f"metric {self.family!r}: k must be a positive integer, got {k!r}") from None
            if k <= 0:
                raise EvretError(f"metric {self.family!r}: k must be a positive integer, got {k}")
        elif self.requires_k:
            raise EvretError(f"metric {self.family!r} needs a cutoff: write {self.family}@K, e.g. {self.family}@10")
        self.k = k

    @property
    def name(self) -> str:
        """``family``, ``family@k``, then any non-default options: ``ndcg@10(gain=exponential)``, ``rbp(p=0.5)``.
        ``create_metric(metric.name)`` rebuilds the same metric."""
        base = self.family if self.k is None else f"{self.family}@{self.k}"
        options = self.name_options()
        return base + "(" + ",".join(f"{key}={value}" for key, value in options.items()) + ")" if options else base

    def name_options(self) -> dict[str, Any]:
        """The options that differ from their defaults, shown in :attr:`name` (none for most metrics)."""
        return {}

    @property
    def depth(self) -> int | None:
        """How many retrieved documents the metric reads (None: all of them)."""
        return self.k

    @property
    def trec_eval_name(self) -> str | None:
        """The name trec_eval prints for this measure, when it has one."""
        if self.k is None:
            return self.trec_name
        return None if self.trec_name_k is None else self.trec_name_k.format(k=self.k)

    def config(self) -> dict[str, Any]:
        return {"name": self.name}

    def compute(self, batch: RankedBatch) -> np.ndarray:
        """The metric for every query of ``batch``, as a float64 array of length ``batch.n_queries``."""
        raise NotImplementedError

    @property
    def needs_judged_max(self) -> bool:
        """True when a default of this metric is the highest grade judged over the whole evaluation (err's
        ``max_grade``) and is not resolved yet: see
        :func:`~evret_core.metrics.engine.resolve_judged_defaults`."""
        return False

    def with_judged_max(self, judged_max: float) -> Metric:
        """This metric with its defaults that depend on the whole evaluation's judgments resolved to
        ``judged_max`` (the highest grade judged): a copy with the same :attr:`name`; most metrics return self."""
        return self

    def score(self, retrieved_ids: Sequence[str], relevant_ids: Relevance) -> float:
        """The metric for one ranked list of ids against relevant ids (a list, or a mapping id -> grade)."""
        batch = RankedBatch.from_rankings([list(retrieved_ids)], [relevant_ids])
        return float(self.compute(batch)[0])

    def __repr__(self) -> str:
        return f"<Metric {self.name}>"


def cut(matrix: np.ndarray, k: int | None) -> np.ndarray:
    """The first ``k`` columns (all when ``k`` is None), zero-padded when the matrix is narrower than ``k``."""
    import numpy as np

    if k is None:
        return matrix
    if matrix.shape[1] >= k:
        return matrix[:, :k]
    pad = np.zeros((matrix.shape[0], k - matrix.shape[1]), dtype=matrix.dtype)
    return np.concatenate([matrix, pad], axis=1)


def safe_divide(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """numerator / denominator, 0 where the denominator is 0."""
    import numpy as np

    numerator = np.asarray(numerator, dtype=np.float64)
    denominator = np.asarray(denominator, dtype=np.float64)
    out = np.zeros(np.broadcast(numerator, denominator).shape, dtype=np.float64)
    np.divide(numerator, denominator, out=out, where=denominator != 0)
    return out
