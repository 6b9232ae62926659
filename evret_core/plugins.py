"""Plugin loading: built-ins plus the entry points of group ``evret``, loaded lazily, once, in isolation.

Environment:

- ``EVRET_LOAD_PLUGINS=a,b``: load only these third-party plugins (``''`` loads none); built-ins always load.
- ``EVRET_DISABLE_PLUGINS=a,b``: never load these.
- ``EVRET_STRICT_PLUGINS=1``: a plugin that fails to import or register raises instead of being reported.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pluggy

from evret_core import hookspecs
from evret_core.errors import PluginError

ENTRY_POINT_GROUP = "evret"
KINDS = ("judge", "metric", "retriever", "evaluator", "llm_provider", "executor")
_HOOK_FOR_KIND = {
    "judge": "register_judges",
    "metric": "register_metrics",
    "retriever": "register_retrievers",
    "evaluator": "register_evaluators",
    "llm_provider": "register_llm_providers",
    "executor": "register_executors",
}
BUILTIN = "evret-core"


@dataclass
class PluginInfo:
    """What ``evret plugins`` shows for one plugin."""

    name: str
    version: str | None
    module: str | None
    builtin: bool = False
    registers: dict[str, list[str]] = field(default_factory=dict)
    hooks: list[str] = field(default_factory=list)
    error: str | None = None
    skipped: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "module": self.module,
            "builtin": self.builtin,
            "registers": self.registers,
            "hooks": self.hooks,
            "error": self.error,
            "skipped": self.skipped,
        }


@dataclass
class _Entry:
    factory: Callable[..., Any]
    plugin: str


def _env_list(name: str) -> set[str] | None:
    value = os.environ.get(name)
    if value is None:
        return None
    return {part.strip() for part in value.split(",") if part.strip()}


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


class PluginRegistry:
    """Owns the pluggy manager and the name -> factory tables of every kind."""

    def __init__(self) -> None:
        self.pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        self.pm.add_hookspecs(hookspecs)
        self._lock = threading.RLock()
        self._loaded = False
        self._loading = False
        self.plugins: dict[str, PluginInfo] = {}
        self._tables: dict[str, dict[str, _Entry]] = {kind: {} for kind in KINDS}
        self._conflicts: dict[str, dict[str, list[str]]] = {kind: {} for kind in KINDS}

    # -- loading -----------------------------------------------------------------------------------------------
    def ensure_loaded(self) -> None:
        if self._loaded:
            return
        with self._lock:
            if self._loaded or self._loading:
                # _loading: a plugin that looks names up while it is imported sees what is loaded so far
                return
            self._loading = True
            try:
                self._load_builtins()
                self._load_entry_points()
                self._loaded = True
            finally:
                self._loading = False

    def _load_builtins(self) -> None:
        from evret_core.default_plugins import BUILTIN_PLUGINS

        version = _dist_version(BUILTIN)
        for module_name in BUILTIN_PLUGINS:
            import importlib

            module = importlib.import_module(module_name)
            info = PluginInfo(name=f"{BUILTIN}:{module_name.rsplit('.', 1)[-1]}", version=version,
                              module=module_name, builtin=True)
            self._add(module, info, strict=True)

    def _load_entry_points(self) -> None:
        allow = _env_list("EVRET_LOAD_PLUGINS")
        block = _env_list("EVRET_DISABLE_PLUGINS") or set()
        strict = _truthy("EVRET_STRICT_PLUGINS")
        seen: set[str] = set()
        for ep in sorted(md.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            if ep.name in seen:
                continue
            seen.add(ep.name)
            dist = getattr(ep, "dist", None)
            version = dist.version if dist is not None else None
            info = PluginInfo(name=ep.name, version=version, module=ep.value)
            if ep.name in block:
                info.skipped = "disabled by EVRET_DISABLE_PLUGINS"
                self.plugins[ep.name] = info
                continue
            if allow is not None and ep.name not in allow:
                info.skipped = "not in EVRET_LOAD_PLUGINS"
                self.plugins[ep.name] = info
                continue
            try:
                obj = ep.load()
            except BaseException as exc:  # a broken plugin must never take the others down
                if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                    raise
                info.error = f"import failed: {type(exc).__name__}: {exc}"
                self.plugins[ep.name] = info
                if strict:
                    raise PluginError(f"plugin {ep.name!r} ({ep.value}) failed to import: {exc}") from exc
                continue
            self._add(obj, info, strict=strict)

    def _add(self, obj: Any, info: PluginInfo, strict: bool) -> None:
        """Register one plugin object with pluggy and collect what its register_* hooks declare."""
        name = info.name
        try:
            self.pm.register(obj, name=name)
            hooks = [h.name for h in self.pm.get_hookcallers(obj) or []]
            info.hooks = sorted(hooks)
            collected: dict[str, list[tuple[str, Callable[..., Any]]]] = {}
            for kind, hook_name in _HOOK_FOR_KIND.items():
                if hook_name not in hooks:
                    continue
                impl = getattr(obj, hook_name)
                items: list[tuple[str, Callable[..., Any]]] = []

                def register(reg_name: str, factory: Callable[..., Any], _items: list[Any] = items,
                             _kind: str = kind) -> None:
                    if not isinstance(reg_name, str) or not reg_name:
                        raise PluginError(f"{_kind} name must be a non-empty string, got {reg_name!r}")
                    if not callable(factory):
                        raise PluginError(f"{_kind} {reg_name!r}: factory is not callable")
                    _items.append((reg_name, factory))

                impl(register=register)
                collected[kind] = items
            self.pm.check_pending()
        except BaseException as exc:
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            if self.pm.is_registered(obj):
                self.pm.unregister(obj)
            info.error = f"registration failed: {type(exc).__name__}: {exc}"
            self.plugins[name] = info
            if strict:
                if info.builtin:
                    raise
                raise PluginError(f"plugin {name!r} failed to register: {exc}\n{traceback.format_exc()}") from exc
            return
        problems: list[str] = []
        for kind, items in collected.items():
            names = []
            for reg_name, factory in items:
                table = self._tables[kind]
                if reg_name in table and table[reg_name].plugin != name:
                    owners = self._conflicts[kind].setdefault(reg_name, [table[reg_name].plugin])
                    owners.append(name)
                    problems.append(
                        f"{kind} {reg_name!r} is registered by both {table[reg_name].plugin!r} and {name!r}"
                    )
                else:
                    table[reg_name] = _Entry(factory=factory, plugin=name)
                names.append(reg_name)
            if names:
                info.registers[kind] = sorted(names)
        if problems:
            info.error = "; ".join(problems)
            if strict:
                self.plugins[name] = info
                raise PluginError(info.error)
        self.plugins[name] = info

    # -- lookups -----------------------------------------------------------------------------------------------
    def names(self, kind: str) -> list[str]:
        self.ensure_loaded()
        return sorted(self._tables[kind])

    def get(self, kind: str, name: str) -> Callable[..., Any]:
        from evret_core.errors import UnknownNameError

        self.ensure_loaded()
        if name in self._conflicts[kind]:
            owners = " and ".join(repr(p) for p in self._conflicts[kind][name])
            raise PluginError(
                f"{kind.replace('_', ' ')} {name!r} is registered by {owners}; uninstall one of them or "
                f"disable one with EVRET_DISABLE_PLUGINS"
            )
        entry = self._tables[kind].get(name)
        if entry is None:
            known = ", ".join(self.names(kind)) or "(none)"
            label = kind.replace("_", " ")
            message = f"unknown {label} {name!r}; known {label}s: {known}"
            dist = KNOWN_DISTRIBUTIONS.get((kind, name))
            if dist is not None:
                broken = self.plugins.get(dist)
                if broken is not None and broken.error:
                    message += f". Plugin {dist!r} is installed but failed to load: {broken.error}"
                elif broken is not None and broken.skipped:
                    message += f". Plugin {dist!r} is installed but {broken.skipped}"
                else:
                    message += f". Install it with: pip install {dist}"
            raise UnknownNameError(message)
        return entry.factory

    def owner(self, kind: str, name: str) -> str | None:
        self.ensure_loaded()
        entry = self._tables[kind].get(name)
        return entry.plugin if entry else None

    def list_plugins(self) -> list[PluginInfo]:
        self.ensure_loaded()
        return [self.plugins[name] for name in sorted(self.plugins, key=lambda n: (not self.plugins[n].builtin, n))]

    def register_plugin(self, obj: Any, name: str) -> PluginInfo:
        """Register an in-process plugin object (a module or an instance with hookimpls) under ``name``."""
        self.ensure_loaded()
        if name in self.plugins:
            raise PluginError(f"a plugin named {name!r} is already loaded")
        info = PluginInfo(name=name, version=None, module=getattr(obj, "__name__", type(obj).__module__))
        self._add(obj, info, strict=True)
        return info

    def adapt(self, obj: Any) -> Any:
        self.ensure_loaded()
        return self.pm.hook.adapt_retriever(obj=obj)


# Names that well-known distributions register, so an unknown name can say what to install.
KNOWN_DISTRIBUTIONS: dict[tuple[str, str], str] = {
    ("retriever", "bm25"): "evret-bm25",
    ("retriever", "dense"): "evret-sentence-transformers",
    ("retriever", "qdrant"): "evret-qdrant",
    ("retriever", "chroma"): "evret-chroma",
    ("retriever", "pgvector"): "evret-pgvector",
    ("retriever", "langchain"): "evret-langchain",
    ("judge", "semantic"): "evret-sentence-transformers",
    ("evaluator", "semantic-similarity"): "evret-sentence-transformers",
    ("llm_provider", "openai"): "evret-openai",
    ("llm_provider", "anthropic"): "evret-anthropic",
    ("llm_provider", "google"): "evret-google-genai",
    ("executor", "ray"): "evret-ray",
}


def _dist_version(dist: str) -> str | None:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


_registry: PluginRegistry | None = None
_registry_lock = threading.Lock()


def get_registry() -> PluginRegistry:
    """The process-wide registry, created on first use."""
    global _registry
    if _registry is None:
        with _registry_lock:
            if _registry is None:
                _registry = PluginRegistry()
    return _registry


def reset_registry() -> None:
    """Forget loaded plugins so that the next lookup loads them again (tests, changed environment)."""
    global _registry
    with _registry_lock:
        _registry = None


def register_plugin(obj: Any, name: str) -> PluginInfo:
    """Register a plugin without packaging it (a notebook, a test): its hooks take part like an entry point's.

    Errors raise instead of being recorded. Forgotten by :func:`reset_registry`.
    """
    return get_registry().register_plugin(obj, name)


def list_plugins() -> list[PluginInfo]:
    """Every plugin seen: built-ins and entry points, with what each registers and any load error."""
    return get_registry().list_plugins()
