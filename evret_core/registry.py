"""Create judges, metrics, retrievers, evaluators (output and retrieval), LLM providers, generators, perturbations
and executors by their registered names.

Every object built here remembers how it was built (:func:`recipe`), so an executor can rebuild it in another
process (a Ray worker builds a judge from its name and options instead of receiving a pickled model)."""

from __future__ import annotations

import inspect
import re
from typing import Any

from evret_core.errors import EvretError
from evret_core.limits import MAX_DEPTH
from evret_core.plugins import get_registry, plugin_exits_as_errors

_METRIC_NAME = re.compile(r"^(?P<family>[A-Za-z_][\w\-]*?)(?:@(?P<k>[^@()]+))?(?:\((?P<options>[^()]*)\))?$")


def _build(kind: str, name: str, options: dict[str, Any]) -> Any:
    factory = get_registry().get(kind, name)
    try:
        inspect.signature(factory).bind(**options)
    except TypeError as exc:
        accepted = _accepted_options(factory)
        hint = f"; accepted options: {', '.join(accepted)}" if accepted else ""
        raise EvretError(f"{kind.replace('_', ' ')} {name!r}: bad options ({exc}){hint}") from None
    except ValueError:  # builtins without a signature
        pass
    with plugin_exits_as_errors():
        built = factory(**options)
    try:
        built.__evret_recipe__ = (kind, name, dict(options))
    except (AttributeError, TypeError, ValueError):  # slots, frozen or builtin objects: not rebuildable by name
        pass
    return built


def recipe(obj: Any) -> tuple[str, str, dict[str, Any]] | None:
    """``(kind, name, options)`` that built ``obj`` through this registry, or None for an object made otherwise."""
    got = getattr(obj, "__evret_recipe__", None)
    return got if isinstance(got, tuple) and len(got) == 3 else None


def _accepted_options(factory: Any) -> list[str]:
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]


def create_judge(name: str, **options: Any) -> Any:
    """A judge registered as ``name`` (``exact``, ``regex``, ``token-overlap``, ``semantic``, ``llm``...)."""
    return _build("judge", name, options)


def create_retriever(name: str, **options: Any) -> Any:
    """A retriever registered as ``name`` (``bm25``, ``dense``, ``qdrant``...)."""
    return _build("retriever", name, options)


def create_evaluator(name: str, **options: Any) -> Any:
    """An output evaluator registered as ``name`` (``exact``, ``regex``, ``llm-score``, ``direct``...): it scores
    records with ``evaluate(records)``. The retrieval evaluator is :func:`create_retrieval_evaluator`'s."""
    return _build("evaluator", name, options)


def create_retrieval_evaluator(name: str, **options: Any) -> Any:
    """A retrieval evaluator registered as ``name`` (the built-in ``retrieval``): it scores a retriever on a
    dataset with ``evaluate(dataset)``."""
    return _build("retrieval_evaluator", name, options)


def create_llm_provider(name: str, **options: Any) -> Any:
    """An LLM provider registered as ``name`` (``openai``, ``anthropic``, ``google``)."""
    return _build("llm_provider", name, options)


def create_generator(name: str, **options: Any) -> Any:
    """A RAG generator registered as ``name`` (``extractive``...)."""
    return _build("generator", name, options)


def create_perturbation(name: str, **options: Any) -> Any:
    """An adversarial perturbation family registered as ``name`` (``counterfactual``, ``injection``...)."""
    return _build("perturbation", name, options)


def create_executor(name: str, **options: Any) -> Any:
    """An executor registered as ``name`` (``local``, ``ray`` with evret-ray)."""
    return _build("executor", name, options)


def parse_metric_spec(spec: str) -> tuple[str, int | None, dict[str, Any]]:
    """Split a metric name into family, cutoff and options: ``"ndcg@10(gain=exponential)"`` gives
    ``("ndcg", 10, {"gain": "exponential"})``, ``"rbp(p=0.5)"`` gives ``("rbp", None, {"p": 0.5})``. Option values
    are read as JSON when they parse (numbers, true/false), else kept as strings."""
    match = _METRIC_NAME.match(spec.strip())
    if not match:
        raise EvretError(
            f"bad metric name {spec!r}; write it as NAME, NAME@K or NAME@K(OPTION=VALUE, ...), e.g. ndcg@10"
        )
    family, k_text, options_text = match.group("family"), match.group("k"), match.group("options")
    options: dict[str, Any] = {}
    for part in (options_text or "").split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise EvretError(f"bad metric name {spec!r}: write each option as KEY=VALUE, e.g. ndcg@10(gain=exponential)")
        options[key.strip()] = _option_value(value.strip())
    if k_text is None:
        return family, None, options
    try:
        k = int(k_text)
    except ValueError:
        raise EvretError(f"bad metric name {spec!r}: the cutoff after '@' must be a positive integer") from None
    if not 0 < k <= MAX_DEPTH:
        raise EvretError(f"bad metric name {spec!r}: the cutoff after '@' must be an integer from 1 to {MAX_DEPTH}")
    return family, k, options


def _option_value(text: str) -> Any:
    import json

    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_metric_name(spec: str) -> tuple[str, int | None]:
    """Split ``"ndcg@10"`` into ``("ndcg", 10)``; ``"mrr"`` gives ``("mrr", None)`` (options are ignored)."""
    family, k, _ = parse_metric_spec(spec)
    return family, k


def create_metric(spec: str, **options: Any) -> Any:
    """A metric from a name such as ``"ndcg@10"``, ``"recall@100"``, ``"mrr"`` or ``"ndcg@10(gain=exponential)"``;
    keyword ``options`` win over options written in the name. ``create_metric(m.name)`` rebuilds ``m``."""
    family, k, named = parse_metric_spec(spec)
    options = {**named, **options}
    if k is not None:
        options = {"k": k, **options}
    return _build("metric", family, options)


def judge_names() -> list[str]:
    return get_registry().names("judge")


def metric_names() -> list[str]:
    return get_registry().names("metric")


def retriever_names() -> list[str]:
    return get_registry().names("retriever")


def evaluator_names() -> list[str]:
    return get_registry().names("evaluator")


def retrieval_evaluator_names() -> list[str]:
    return get_registry().names("retrieval_evaluator")


def llm_provider_names() -> list[str]:
    return get_registry().names("llm_provider")


def generator_names() -> list[str]:
    return get_registry().names("generator")


def perturbation_names() -> list[str]:
    return get_registry().names("perturbation")


def executor_names() -> list[str]:
    return get_registry().names("executor")
