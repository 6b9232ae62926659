"""``LLMSettings``: the one set of options (and defaults) of everything that calls an LLM.

The ``llm`` judge, ``llm-score`` and the criteria judges take these options by name (``provider=``, ``model=``,
``timeout=``...) or as one ``settings=LLMSettings(...)``; every value is checked up front, so a hostile value
(``timeout=-1``, ``temperature=nan``, ``max_concurrency=10**9``) fails before any call with an
:class:`~evret_core.contracts.errors.EvretError` naming the option, instead of leaving every judgment unmeasured.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, field_validator

from evret_core.contracts.errors import EvretError, UnknownNameError, did_you_mean
from evret_core.contracts.provider import LLMProvider

# Bounds that catch typos and hostile values, far beyond any real use.
MAX_CONCURRENCY = 1024
MAX_RETRIES = 100
MAX_TIMEOUT_S = 24 * 3600.0


class LLMSettings(BaseModel):
    """Provider, sampling and call policy of LLM calls. ``retries``, ``rpm`` and ``tpm`` also accept their long
    names ``max_retries``, ``requests_per_minute`` and ``tokens_per_minute``.

    :param provider: a registered provider name (``openai``, ``anthropic``, ``google``...) or a provider object.
    :param model: the provider's model (default: the provider's documented default).
    :param api_key: the key; default from the provider's environment variable. Never shown or stored.
    :param base_url: another endpoint for the provider (a proxy, a compatible server).
    :param provider_options: further options of the provider's factory (``organization=`` for openai...).
    :param temperature: sampling temperature, in [0, 2] (part of every cache key).
    :param timeout: seconds one attempt may take.
    :param retries: retries per call on 429, 5xx, connection errors and timeouts.
    :param max_concurrency: most calls in flight at once.
    :param adaptive_concurrency: halve the calls in flight on a 429, then grow back to ``max_concurrency``
        (off by default: with 429s that do not depend on load it costs throughput; see docs/llm-judging.md).
    :param max_retry_after: the longest a server's Retry-After (or ``retry-after-ms``) is obeyed, in seconds
        (default 60). A call whose server asks for a longer wait is given up at once, unmeasured, with one line
        on stderr, rather than stalling the run (a hostile or broken server can ask for years).
    :param rpm: optional limit on request starts per minute.
    :param tpm: optional limit on tokens (sent and received) per minute.
    :param cache: None or True (the default file), False (off), or a path to the SQLite file or its folder.
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True, populate_by_name=True, frozen=True)

    provider: str | LLMProvider = "openai"
    model: str | None = None
    api_key: str | None = Field(default=None, repr=False)
    base_url: str | None = None
    provider_options: dict[str, Any] = Field(default_factory=dict)
    temperature: float = 0.0
    timeout: float = 60.0
    retries: int = Field(default=3, validation_alias=AliasChoices("retries", "max_retries"))
    max_concurrency: int = 16
    adaptive_concurrency: bool = False
    max_retry_after: float = 60.0
    rpm: float | None = Field(default=None, validation_alias=AliasChoices("rpm", "requests_per_minute"))
    tpm: float | None = Field(default=None, validation_alias=AliasChoices("tpm", "tokens_per_minute"))
    cache: Any = None

    @field_validator("provider")
    @classmethod
    def _provider(cls, value: Any) -> Any:
        if isinstance(value, str) and not value.strip():
            raise ValueError("must be a registered provider name such as 'openai'")
        return value

    @field_validator("temperature")
    @classmethod
    def _temperature(cls, value: float) -> float:
        if not math.isfinite(value) or not 0.0 <= value <= 2.0:
            raise ValueError(f"must be a number from 0 to 2, got {value}")
        return value

    @field_validator("timeout")
    @classmethod
    def _timeout(cls, value: float) -> float:
        if not math.isfinite(value) or not 0.0 < value <= MAX_TIMEOUT_S:
            raise ValueError(f"must be a number of seconds above 0 and at most {MAX_TIMEOUT_S:g}, got {value}")
        return value

    @field_validator("max_retry_after")
    @classmethod
    def _max_retry_after(cls, value: float) -> float:
        if not math.isfinite(value) or not 0.0 <= value <= MAX_TIMEOUT_S:
            raise ValueError(f"must be a number of seconds from 0 to {MAX_TIMEOUT_S:g}, got {value}")
        return value

    @field_validator("retries")
    @classmethod
    def _retries(cls, value: int) -> int:
        if not 0 <= value <= MAX_RETRIES:
            raise ValueError(f"must be an integer from 0 to {MAX_RETRIES}, got {value}")
        return value

    @field_validator("max_concurrency")
    @classmethod
    def _concurrency(cls, value: int) -> int:
        if not 1 <= value <= MAX_CONCURRENCY:
            raise ValueError(f"must be an integer from 1 to {MAX_CONCURRENCY}, got {value}")
        return value

    @field_validator("rpm", "tpm")
    @classmethod
    def _per_minute(cls, value: float | None) -> float | None:
        if value is not None and (not math.isfinite(value) or value <= 0):
            raise ValueError(f"must be a positive number, got {value}")
        return value

    @classmethod
    def build(cls, owner: str, settings: LLMSettings | Mapping[str, Any] | None = None,
              **options: Any) -> LLMSettings:
        """Settings from ``settings`` (an object or a mapping) updated by ``options``; an :class:`EvretError`
        naming ``owner`` and the option when a value is bad or an option unknown."""
        base: dict[str, Any] = {}
        if isinstance(settings, LLMSettings):
            base = {name: getattr(settings, name) for name in settings.model_fields_set}
        elif isinstance(settings, Mapping):
            base = dict(settings)
        elif settings is not None:
            raise EvretError(f"{owner}: option 'settings' must be an LLMSettings or a mapping, "
                             f"got {type(settings).__name__}")
        for long, short in (("max_retries", "retries"), ("requests_per_minute", "rpm"),
                            ("tokens_per_minute", "tpm")):
            if long in options:  # a long name given now replaces the short one from ``settings``
                base.pop(short, None)
            if short in options:
                base.pop(long, None)
        try:
            return cls.model_validate({**base, **options})
        except ValidationError as exc:
            first = exc.errors()[0]
            name = ".".join(str(p) for p in first["loc"]) or "settings"
            if first["type"] == "extra_forbidden":
                known = ", ".join(sorted(_option_names()))
                hint = did_you_mean(name, _option_names())
                raise EvretError(f"{owner}: unknown option {name!r}{hint}; LLM options: {known}") from None
            message = str(first["msg"]).removeprefix("Value error, ")
            raise EvretError(f"{owner}: option {name!r}: {message}") from None

    # -- the provider ----------------------------------------------------------------------------------------
    @property
    def provider_name(self) -> str:
        return self.provider.name if isinstance(self.provider, LLMProvider) else str(self.provider)

    def provider_factory(self) -> Any:
        """The registered factory of :attr:`provider` (a name); an error naming the plugin to install."""
        from evret_core.plugins.loading import KNOWN_DISTRIBUTIONS, get_registry

        name = self.provider_name
        try:
            return get_registry().get("llm_provider", name)
        except UnknownNameError as exc:
            dist = KNOWN_DISTRIBUTIONS.get(("llm_provider", name))
            if dist is None:
                raise
            raise UnknownNameError(f"LLM provider {name!r} needs the {dist} plugin ({exc})") from None

    def default_model(self) -> str | None:
        """The model calls will use, known without building the provider (no key needed), so that cache keys
        and ``--dry-run`` agree with real runs: :attr:`model`, else the factory's ``default_model``."""
        if isinstance(self.provider, LLMProvider):
            return self.provider.model
        factory = self.provider_factory()  # an unknown provider fails here, before any work
        if self.model:
            return self.model
        model = getattr(factory, "default_model", None)
        return str(model) if model else None

    def make_provider(self, owner: str = "LLM") -> LLMProvider:
        """The provider object: :attr:`provider` itself, or the registered factory called with ``model``,
        ``api_key``, ``base_url`` and ``timeout`` (those set) and :attr:`provider_options`."""
        if isinstance(self.provider, LLMProvider):
            return self.provider
        options: dict[str, Any] = dict(self.provider_options)
        for key in ("model", "api_key", "base_url"):
            value = getattr(self, key)
            if value is not None:
                options[key] = value
        factory = self.provider_factory()
        if "timeout" in _parameters(factory):
            options.setdefault("timeout", self.timeout)
        from evret_core.plugins.registry import create_llm_provider

        provider = create_llm_provider(self.provider_name, **options)
        if not isinstance(provider, LLMProvider):
            raise EvretError(f"{owner}: provider {self.provider_name!r} did not build an LLMProvider")
        return provider

    def public(self) -> dict[str, Any]:
        """The settings for manifests and results: no API key, a provider object by its config."""
        data = self.model_dump(exclude={"api_key", "provider", "cache"})
        data["provider"] = self.provider_name
        return data


def _parameters(factory: Any) -> set[str]:
    import inspect

    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return set()
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return {"timeout", *(p.name for p in params)}
    return {p.name for p in params}


def _option_names() -> set[str]:
    names: set[str] = set()
    for name, field in LLMSettings.model_fields.items():
        alias = field.validation_alias
        names.update(alias.choices if isinstance(alias, AliasChoices) else [name])  # type: ignore[arg-type]
    return names
