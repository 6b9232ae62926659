"""The one component builder: every part made from a registered name (``create_judge``, ``EvaluateConfig``,
``RagConfig``, ``Evaluator(judge=NAME, judge_options=...)``, a worker rebuilding a recipe) is made by :func:`build`.

It checks the options against the factory's signature (an option the factory does not take is named with where it
was written, ``eval.toml [judge]``, ``--judge-option`` or ``Python``, with a did-you-mean and the accepted
options; a factory taking ``**options`` accepts all), hands the factory the dataset or corpus being evaluated when
it takes one, turns a plugin's ``sys.exit()`` into its error, and stamps the built object with its
:class:`~evret_core.plugins.recipes.Recipe` so that an executor can build it again elsewhere (:func:`rebuild`).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any, TypeVar, overload

from evret_core.contracts.errors import EvretError, did_you_mean
from evret_core.contracts.kinds import Kind
from evret_core.plugins.loading import get_registry, plugin_exits_as_errors
from evret_core.plugins.recipes import Recipe

__all__ = ["build", "check_options", "rebuild"]

T = TypeVar("T")


@overload
def build(kind: Kind[T], name: str, options: Mapping[str, Any], *, sources: Mapping[str, str] | None = None,
          dataset: Any = None, corpus: Mapping[str, Any] | None = None) -> T: ...


@overload
def build(kind: str, name: str, options: Mapping[str, Any], *, sources: Mapping[str, str] | None = None,
          dataset: Any = None, corpus: Mapping[str, Any] | None = None) -> Any: ...


def build(kind: Kind[Any] | str, name: str, options: Mapping[str, Any], *, sources: Mapping[str, str] | None = None,
          dataset: Any = None, corpus: Mapping[str, Any] | None = None) -> Any:
    """The object registered as ``name`` for ``kind``, built with ``options``, remembering its recipe.

    ``sources`` says where each option was written (``eval.toml [judge]``, ``--judge-option``, ``Python`` for one
    it does not name): given, an option the factory does not take is reported with its source, and an error the
    factory raises says where the options came from. ``dataset`` goes to a factory taking ``dataset`` (unless an
    option names one); ``corpus`` (documents by id) to a factory taking ``corpus``, or else as a dataset with no
    queries to one taking ``dataset``, unless an option names a corpus.
    """
    kind_name = kind if isinstance(kind, str) else kind.name
    factory = get_registry().get(kind_name, name)
    given = dict(options)
    params = _parameters(factory)
    if sources is not None:
        _check_names(kind_name, name, given, sources, params)
    built_with = {**given, **_injected(params, given, dataset, corpus)}
    try:
        built = _call(kind_name, name, factory, built_with)
    except EvretError as exc:
        written = sorted({sources.get(option, "Python") for option in given}) if sources is not None else []
        if not written:
            raise
        raise EvretError(f"{exc} (options from {' and '.join(written)})") from None
    try:
        built.__evret_recipe__ = Recipe(kind_name, name, built_with)
    except (AttributeError, TypeError, ValueError):  # slots, frozen or builtin objects: not rebuildable by name
        pass
    return built


def check_options(kind: Kind[Any] | str, name: str, options: Mapping[str, Any], sources: Mapping[str, str]) -> None:
    """What :func:`build` checks before it builds: ``name`` is registered for ``kind`` and its factory takes every
    option (named with its source). A composite part (the ``hybrid`` retriever) checks all its parts this way
    before building the first."""
    kind_name = kind if isinstance(kind, str) else kind.name
    _check_names(kind_name, name, options, sources, _parameters(get_registry().get(kind_name, name)))


def rebuild(made: Recipe) -> Any:
    """The part ``made`` describes, built in this process: by the recipe's own ``build`` when it has one (the RAG
    harness's generator, claim judge and relevance), else by :func:`build` from its kind, name and options; a
    recipe not made by name is the object it carries."""
    if not made.by_name:
        return made.part
    if made.build is not None:
        return made.build(made.name, dict(made.options))
    return build(made.kind, str(made.name), made.options)


def _parameters(factory: Any) -> Mapping[str, inspect.Parameter] | None:
    """The factory's parameters, or None when it has no signature (a builtin)."""
    try:
        return inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return None


def _accepted(params: Mapping[str, inspect.Parameter] | None) -> list[str]:
    if params is None:
        return []
    return [n for n, p in params.items() if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _check_names(kind: str, name: str, options: Mapping[str, Any], sources: Mapping[str, str],
                 params: Mapping[str, inspect.Parameter] | None) -> None:
    """An option the factory does not take, named with where it was written (a factory taking ``**options`` or
    without a signature accepts all)."""
    if params is None or any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return
    accepted = _accepted(params)
    for option in options:
        if option not in accepted:
            raise EvretError(
                f"{kind} {name!r}: option {option!r} (from {sources.get(option, 'Python')}) is not an option "
                f"of this {kind}{did_you_mean(option, accepted)}; accepted options: {', '.join(accepted) or 'none'}")


def _injected(params: Mapping[str, inspect.Parameter] | None, options: Mapping[str, Any], dataset: Any,
              corpus: Mapping[str, Any] | None) -> dict[str, Any]:
    """What the factory is handed besides the options: the dataset, or the corpus (as itself or as a dataset with
    no queries)."""
    if params is None:
        return {}
    if dataset is not None and "dataset" in params and "dataset" not in options:
        return {"dataset": dataset}
    if corpus and "corpus" not in options:
        if "corpus" in params:
            return {"corpus": corpus}
        if "dataset" in params and "dataset" not in options:
            from evret_core.io.datasets import EvaluationDataset  # pydantic: only when a corpus is wrapped

            return {"dataset": EvaluationDataset(queries=[], corpus=dict(corpus))}
    return {}


def _call(kind: str, name: str, factory: Any, options: dict[str, Any]) -> Any:
    """``factory(**options)`` once the options bind to its signature; a plugin's ``sys.exit()`` is its error."""
    try:
        inspect.signature(factory).bind(**options)
    except TypeError as exc:
        accepted = _accepted(_parameters(factory))
        typo = next((o for o in options if o not in accepted), None)
        hint = (f"{did_you_mean(typo, accepted) if typo else ''}; accepted options: {', '.join(accepted)}"
                if accepted else "")
        raise EvretError(f"{kind.replace('_', ' ')} {name!r}: bad options ({exc}){hint}") from None
    except ValueError:  # builtins without a signature
        pass
    with plugin_exits_as_errors():
        return factory(**options)
