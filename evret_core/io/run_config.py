"""The one config style of Evret's runs: a typed model layered from the command line over a TOML file over defaults.

:class:`Config` is the base of :class:`~evret_core.evaluation.config.EvaluateConfig` (``evret evaluate``) and
:class:`~evret_core.rag.rag_config.RagConfig` (``evret rag``). Each holds its run's settings as typed fields, with
its components (retriever, judge, generator, claim judge, executor...) as a :class:`ComponentSpec`: a registered
name and the options its factory is called with. Layers, lowest first:

1. the model's defaults;
2. a TOML file (``--config``) with the same keys: relative paths, and component options naming files, are relative
   to the file (:meth:`Config.file_settings`, :func:`component_layer`); a component is a name or a table with
   ``name`` and its options;
3. the command line (:func:`layer_component` for ``--judge NAME`` and ``--judge-option KEY=VALUE``): a flag wins
   over the file; naming another component than the file's drops the file's options for it (they were written
   for that component).

:meth:`Config.from_args` layers a command line (``--config``, the flags, each component's ``--KIND`` and
``--KIND-option``) for ``evret evaluate`` and ``evret rag`` alike. :meth:`Config.validated` validates the layered
settings and turns the first problem into one :class:`~evret_core.contracts.errors.EvretError` naming where the
value was written: ``eval.toml: option 'k': ...``, the flag, or, from Python, ``EvaluateConfig: option 'k': ...``.
Bounded integers are checked by :func:`evret_core.limits.check_int`, the check the constructors make. Each
component's options keep where they were written (:meth:`ComponentSpec.sources`), for the component builder's
errors (:mod:`evret_core.plugins.builder`).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from evret_core.contracts.errors import EvretError, did_you_mean
from evret_core.io.options import parse_options
from evret_core.limits import check_int

__all__ = ["ComponentSpec", "Config", "PATH_OPTION_SUFFIXES", "component_layer", "int_in", "layer_component",
           "load_toml", "relative"]

PATH_OPTION_SUFFIXES = ("corpus", "path", "file", "dir")
"""Component options naming files (``corpus``, ``*_path``, ``*_file``, ``*_dir``): relative to a config file."""

C = TypeVar("C", bound="Config")


class ComponentSpec(BaseModel):
    """A component of a run (retriever, judge, generator, claim judge, executor...): its registered ``name`` and
    the ``options`` its factory is called with.

    Given as a name (``"bm25"``), a mapping with ``name`` and the options beside it (a TOML table), or a mapping
    ``{"name": ..., "options": {...}}``.
    """

    model_config = ConfigDict(extra="forbid")

    name: str
    options: dict[str, Any] = Field(default_factory=dict)
    _sources: dict[str, str] = PrivateAttr(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        if isinstance(value, str):
            return {"name": value}
        if isinstance(value, Mapping):
            if set(value) <= {"name", "options"} and isinstance(value.get("options", {}), Mapping):
                return value
            return {"name": value.get("name"), "options": {k: v for k, v in value.items() if k != "name"}}
        return value

    @field_validator("name", mode="before")
    @classmethod
    def _named(cls, value: Any) -> Any:
        if not isinstance(value, str):
            raise ValueError("missing or not a string")
        if not value.strip():
            raise ValueError("the name is empty")
        return value

    @field_validator("options")
    @classmethod
    def _finite(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key, option in value.items():  # TOML and JSON both spell NaN and infinity; no option wants them
            if isinstance(option, float) and not math.isfinite(option):
                raise ValueError(f"option {key!r} is {option}; give a finite number")
        return value

    def source_of(self, option: str) -> str:
        """Where ``option`` was written: ``eval.toml [judge]``, ``--judge-option``, or ``Python``."""
        return self._sources.get(option, "Python")

    def sources(self) -> dict[str, str]:
        """Where each option was written (:meth:`source_of`), as the component builder reports it."""
        return {option: self.source_of(option) for option in self.options}


def int_in(low: int, high: int) -> Callable[[Any], Any]:
    """A field check: None, or an integer (not a bool) from ``low`` to ``high``, checked by
    :func:`evret_core.limits.check_int` (the check the constructors make)."""
    def check(value: Any) -> Any:
        if value is None:
            return value
        try:
            return check_int(value, "", low, high)
        except EvretError as exc:  # the model's error names the file, flag or model and the option
            raise ValueError(str(exc).lstrip()) from None
    return check


class Config(BaseModel):
    """The base of a run's typed settings (see the module). A subclass names its path settings (:attr:`PATHS`),
    its components (:attr:`COMPONENTS`) and each setting's command-line flag (:attr:`FLAGS`)."""

    model_config = ConfigDict(extra="forbid")

    PATHS: ClassVar[tuple[str, ...]] = ()
    """Settings naming files: relative to the config file they are written in."""
    COMPONENTS: ClassVar[tuple[str, ...]] = ()
    """Settings that are a :class:`ComponentSpec`."""
    FLAGS: ClassVar[dict[str, str]] = {}
    """Each setting's command-line flag."""
    FLAG_SEPARATOR: ClassVar[str] = ": "
    """Between a flag and a problem that reads ``must be ...`` in an error (``--seed: must be ...``)."""

    REQUIRED: ClassVar[tuple[str, ...]] = ()
    """Settings without a default: missing, the error names their flag (:meth:`from_args`)."""

    @classmethod
    def from_args(cls: type[C], args: Any) -> C:
        """The settings of a command line (an ``argparse.Namespace``): the ``--config`` file's, then each flag of
        :attr:`FLAGS` on top (:meth:`flag_value`), then each component's ``--KIND NAME`` and
        ``--KIND-option KEY=VALUE`` (:func:`layer_component`; options alone go to :meth:`default_component`).
        Errors name the file and option, or the flag."""
        data: dict[str, Any] = {}
        sources: dict[str, str] = {}
        option_sources: dict[str, dict[str, str]] = {}
        config = getattr(args, "config", None)
        if config:
            data, option_sources = cls.file_settings(load_toml(config), config)
            sources = {key: str(config) for key in data}
        for key, flag in cls.FLAGS.items():
            value = None if key in cls.COMPONENTS else cls.flag_value(args, key)
            if value is not None:
                data[key], sources[key] = value, flag
        cls.layer_args(args, data, sources, option_sources)
        for kind in cls.COMPONENTS:
            flag = f"--{kind.replace('_', '-')}"
            layer_component(data, sources, option_sources, kind, getattr(args, kind, None),
                            parse_options(getattr(args, f"{kind}_option", None), f"{flag}-option"),
                            cls.default_component(kind))
        required = {key: cls.FLAGS.get(key, f"--{key.replace('_', '-')}") for key in cls.REQUIRED}
        return cls.validated(data, sources, option_sources, required_flags=required)

    @classmethod
    def flag_value(cls, args: Any, key: str) -> Any:
        """The command line's value of setting ``key``, None when its flag was not given."""
        return getattr(args, key, None)

    @classmethod
    def layer_args(cls, args: Any, data: dict[str, Any], sources: dict[str, str],
                   option_sources: dict[str, dict[str, str]]) -> None:
        """Put what a command line says besides :attr:`FLAGS` and the components into ``data`` (nothing here)."""

    @classmethod
    def default_component(cls, kind: str) -> str | None:
        """The component ``--KIND-option`` alone applies to: the setting's default (None: the flag is needed)."""
        return getattr(cls.model_fields[kind].default, "name", None)

    @classmethod
    def from_toml(cls: type[C], path: str | Path) -> C:
        """The settings of a TOML file; relative paths are relative to the file; errors name the file."""
        data, option_sources = cls.file_settings(load_toml(path), path)
        return cls.validated(data, {key: str(path) for key in data}, option_sources)

    @classmethod
    def file_settings(cls, raw: Mapping[str, Any], path: str | Path
                      ) -> tuple[dict[str, Any], dict[str, dict[str, str]]]:
        """A config file's settings with paths made relative to the file, and per component the source of each
        option (``"eval.toml [judge]"``)."""
        base = Path(path).parent
        data: dict[str, Any] = dict(raw)
        option_sources: dict[str, dict[str, str]] = {}
        for key in cls.PATHS:
            if key in data:
                data[key] = relative(base, data[key])
        for kind in cls.COMPONENTS:
            if kind in data:
                data[kind], option_sources[kind] = component_layer(data[kind], base, f"{path} [{kind}]")
        return data, option_sources

    @classmethod
    def validated(cls: type[C], data: Mapping[str, Any], sources: Mapping[str, str] | None = None,
                  option_sources: Mapping[str, Mapping[str, str]] | None = None,
                  required_flags: Mapping[str, str] | None = None) -> C:
        """Validate ``data``; ``sources`` says where each setting came from (a file or a flag) so that an error
        names it; ``option_sources`` does the same per component option. A wrong value is reported before a
        missing setting; a missing setting with a flag in ``required_flags`` is reported as ``missing --FLAG (or
        'setting' in the --config file)``."""
        sources = sources or {}
        try:
            config = cls.model_validate(dict(data))
        except ValidationError as exc:
            raise cls.config_error(exc, sources, required_flags) from None
        for kind in cls.COMPONENTS:
            spec = getattr(config, kind)
            if spec is not None:
                spec._sources = dict((option_sources or {}).get(kind, {}))
        return config

    @classmethod
    def config_error(cls, exc: ValidationError, sources: Mapping[str, str],
                     required_flags: Mapping[str, str] | None = None) -> EvretError:
        """The first problem of ``exc`` (a wrong value before a missing setting) as one error naming the file and
        option, the flag, or the model."""
        errors = exc.errors()
        err = next((e for e in errors if e.get("type") != "missing"), errors[0])
        loc = [str(p) for p in err.get("loc", ())]
        field = loc[0] if loc else "config"
        if err.get("type") == "missing" and len(loc) == 1 and field in (required_flags or {}):
            return EvretError(f"missing {(required_flags or {})[field]} (or '{field}' in the --config file)")
        message = str(err.get("msg", "")).removeprefix("Value error, ")
        if err.get("type") == "extra_forbidden":
            known = ", ".join(sorted(name for name in cls.model_fields))
            message = f"unknown setting{did_you_mean(field, cls.model_fields)}; known settings are {known}"
        elif err.get("type") == "missing":
            message = "missing"
        name = ".".join(loc) or field
        source = sources.get(field)
        if source is None:
            return EvretError(f"{cls.__name__}: option {name!r}: {message}")
        if source.startswith("-"):
            return EvretError(f"{source}{cls.FLAG_SEPARATOR if message.startswith('must ') else ': '}{message}")
        return EvretError(f"{source}: option {name!r}: {message}")


def relative(base: Path, value: Any) -> Any:
    """``value`` (a path written in a config file in folder ``base``) relative to that folder."""
    if isinstance(value, str) and value and not Path(value).is_absolute():
        return str(base / value)
    return value


def _relative_options(base: Path, options: Mapping[str, Any]) -> dict[str, Any]:
    """A component's options with its file-naming ones relative to ``base``, and those of the components nested in
    a list of ``{name, options}`` tables (the ``hybrid`` retriever's ``retrievers``) too."""
    out: dict[str, Any] = {}
    for key, value in options.items():
        if key.endswith(PATH_OPTION_SUFFIXES):
            value = relative(base, value)
        elif isinstance(value, list):
            value = [{**part, "options": _relative_options(base, part["options"])}
                     if isinstance(part, Mapping) and "name" in part and isinstance(part.get("options"), Mapping)
                     else part for part in value]
        out[key] = value
    return out


def component_layer(value: Any, base: Path, source: str) -> tuple[Any, dict[str, str]]:
    """A config file's component value (a name or a table) with its file-naming options made relative to
    ``base``, and the source of each option (``source``)."""
    if isinstance(value, Mapping) and not (set(value) <= {"name", "options"} and "options" in value):
        options = {k: v for k, v in value.items() if k != "name"}
        value = {"name": value.get("name"), "options": _relative_options(base, options)}
        return value, {k: source for k in options}
    if isinstance(value, Mapping) and isinstance(value.get("options"), Mapping):
        return value, {k: source for k in value["options"]}
    return value, {}


def layer_component(data: dict[str, Any], sources: dict[str, str], option_sources: dict[str, dict[str, str]],
                    kind: str, name: str | None, flag_options: Mapping[str, Any], default: str | None = None) -> None:
    """Put the command line's component ``kind`` (``--KIND NAME``, ``--KIND-option`` ``flag_options``) over the
    file's in ``data``: another name than the file's drops the file's options; the flag's options are added to
    those of whichever component is used (``default`` when neither names one)."""
    if name is None and not flag_options:
        return
    flag = f"--{kind.replace('_', '-')}"
    current = data.get(kind)
    spec = dict(current) if isinstance(current, dict) else {"name": current} if current is not None else {}
    if name is not None:
        if spec.get("name") != name:  # the file's options were written for the file's component
            spec = {"options": {}}
            option_sources[kind] = {}
        spec["name"] = name
        sources[kind] = flag
    if spec.get("name") is None and default is not None:
        spec["name"] = default
    options = spec.get("options")
    options = dict(options) if isinstance(options, dict) else {}
    options.update(flag_options)
    spec["options"] = options
    option_sources.setdefault(kind, {}).update({key: f"{flag}-option" for key in flag_options})
    data[kind] = spec
    sources.setdefault(kind, f"{flag}-option")


def load_toml(path: str | Path) -> dict[str, Any]:
    """Read a TOML file (UTF-8; a byte-order mark is dropped); errors name the file and line."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    from evret_core.io.jsonio import read_text

    text = read_text(path, "config file")  # a bad byte is reported with its line
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise EvretError(f"{path}: invalid TOML: {exc}") from None
    except RecursionError:
        raise EvretError(f"{path}: invalid TOML: nested too deeply") from None
