"""Plugin loading: built-ins plus the entry points of group ``evret``, loaded lazily, once, in isolation.

Environment:

- ``EVRET_LOAD_PLUGINS=a,b``: load only these third-party plugins (``''`` loads none); built-ins always load.
- ``EVRET_DISABLE_PLUGINS=a,b``: never load these.
- ``EVRET_STRICT_PLUGINS=1``: a plugin that fails to import or register raises instead of being reported.

Each plugin's ``register_*`` hooks are called through pluggy (so ``specname``, ``tryfirst``/``trylast`` and
hookwrappers apply), one plugin at a time through a subset hook caller: a plugin whose hook raises, even
``SystemExit``, is recorded and reported and the others still load. Only ``KeyboardInterrupt`` goes through.

At run time, :func:`plugin_exits_as_errors` wraps the calls into plugin-made objects (their factories in the
registry; the executor's stages, retrieving, judging, metrics and generation, where the evaluator and the RAG
harness call them): a plugin's ``sys.exit()`` there is a :class:`PluginError` naming the plugin instead of the end
of the process.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import pluggy

from evret_core.contracts import hooks as _hooks
from evret_core.contracts import kinds as _kinds
from evret_core.contracts.errors import PluginError
from evret_core.contracts.hooks import Registrar
from evret_core.contracts.kinds import Kind

ENTRY_POINT_GROUP = "evret"
# The registry keys, from the one table of kinds (evret_core.contracts.kinds); the registry reads that table itself.
KINDS = tuple(kind.name for kind in _kinds.KINDS)
BUILTIN = "evret-core"


def describe_failure(exc: BaseException) -> str:
    """``Type: message`` of a plugin's failure; ``SystemExit`` says that the plugin tried to exit."""
    if isinstance(exc, SystemExit):
        return f"SystemExit: the plugin called sys.exit({exc.code!r})"
    return f"{type(exc).__name__}: {exc}"


def exit_as_error(exc: SystemExit) -> PluginError | None:
    """The error to raise instead of ``exc`` when a third-party plugin's code called ``sys.exit()`` while evret ran
    it (its judge judging, its retriever retrieving, its factory building), or None when evret's own code or the
    user's raised it (which then goes through). The status is shown when it is a number, never a message (it may
    hold anything, a key included)."""
    info = get_registry().plugin_of(exc.__traceback__)
    if info is None:
        return None
    status = f"sys.exit({exc.code!r})" if exc.code is None or type(exc.code) is int else "sys.exit(...)"
    dist = info.distribution or info.name
    return PluginError(f"plugin {info.name!r} (distribution {dist}{' ' + info.version if info.version else ''}) "
                       f"called {status} while evret ran it; a plugin must raise an exception instead")


@contextmanager
def plugin_exits_as_errors() -> Iterator[None]:
    """Run calls into plugin code: a plugin's ``sys.exit()`` becomes the :class:`PluginError` of
    :func:`exit_as_error`, so it can never end the program (or a user's script) silently with its status.
    ``KeyboardInterrupt`` and everyone else's ``SystemExit`` go through unchanged."""
    try:
        yield
    except SystemExit as exc:
        error = exit_as_error(exc)
        if error is None:
            raise
        raise error from exc


@dataclass
class PluginInfo:
    """What ``evret plugins`` shows for one plugin."""

    name: str
    version: str | None
    module: str | None
    builtin: bool = False
    distribution: str | None = None
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
            "distribution": self.distribution,
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
        self.pm = pluggy.PluginManager(_hooks.PROJECT_NAME)
        self.pm.add_hookspecs(_hooks)
        self._lock = threading.RLock()
        self._loaded = False
        self._loading = False
        self.plugins: dict[str, PluginInfo] = {}
        # one table per kind of the table of kinds, read now (not at import) so that a kind added there is known
        self._kinds: dict[str, Kind[Any]] = {kind.name: kind for kind in _kinds.KINDS}
        self._tables: dict[str, dict[str, _Entry]] = {kind: {} for kind in self._kinds}
        self._conflicts: dict[str, dict[str, list[str]]] = {kind: {} for kind in self._kinds}

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
        from evret_core.plugins.builtins import BUILTIN_PLUGINS

        version = _dist_version(BUILTIN)
        for plugin in BUILTIN_PLUGINS:
            info = PluginInfo(name=f"{BUILTIN}:{plugin.name}", version=version,
                              module="evret_core.plugins.builtins", builtin=True)
            self._add(plugin, info, strict=True)

    def _load_entry_points(self) -> None:
        import importlib.metadata as md  # here, not at the top: it costs more than the SDK that imports this module

        allow = _env_list("EVRET_LOAD_PLUGINS")
        block = _env_list("EVRET_DISABLE_PLUGINS") or set()
        strict = _truthy("EVRET_STRICT_PLUGINS")
        seen: set[str] = set()
        for ep in sorted(md.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            if ep.name in seen:
                continue
            seen.add(ep.name)
            dist = getattr(ep, "dist", None)
            # read and parsed once (``dist.version`` reads and parses the whole file again)
            meta = dist.metadata if dist is not None else None
            version = meta["Version"] if meta is not None else None
            dist_name = meta["Name"] if meta is not None else None
            info = PluginInfo(name=ep.name, version=version, module=ep.value, distribution=dist_name)
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
            except BaseException as exc:  # a broken plugin, even one calling sys.exit(), never takes the rest down
                if isinstance(exc, KeyboardInterrupt):
                    raise
                info.error = f"import failed: {describe_failure(exc)}"
                self.plugins[ep.name] = info
                if strict:
                    raise PluginError(
                        f"plugin {ep.name!r} ({ep.value}) failed to import: {describe_failure(exc)}"
                    ) from exc
                continue
            self._add(obj, info, strict=strict)

    def _add(self, obj: Any, info: PluginInfo, strict: bool) -> None:
        """Register one plugin object with pluggy and collect what its register_* hooks declare."""
        name = info.name
        try:
            self.pm.register(obj, name=name)
            self.pm.check_pending()
            hooks = [h.name for h in self.pm.get_hookcallers(obj) or []]
            info.hooks = sorted(hooks)
            others = [p for p in self.pm.get_plugins() if p is not obj]
            collected: dict[str, list[tuple[str, Callable[..., Any]]]] = {}
            for kind, row in self._kinds.items():
                if row.hook not in hooks:
                    continue
                items: list[tuple[str, Callable[..., Any]]] = []
                collected[kind] = items
                # this plugin's implementations only (specname, tryfirst/trylast and wrappers apply), so that
                # one plugin's failure is its own
                caller = self.pm.subset_hook_caller(row.hook, remove_plugins=others)
                caller(register=Registrar(row, name, items))
        except BaseException as exc:  # SystemExit included: a plugin must not end evret
            if isinstance(exc, KeyboardInterrupt):
                raise
            if self.pm.is_registered(obj):
                self.pm.unregister(obj)
            info.error = f"registration failed: {describe_failure(exc)}"
            self.plugins[name] = info
            if strict:
                if info.builtin:
                    raise
                import traceback

                raise PluginError(
                    f"plugin {name!r} failed to register: {describe_failure(exc)}\n{traceback.format_exc()}"
                ) from exc
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
        from evret_core.contracts.errors import UnknownNameError, did_you_mean

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
            message = f"unknown {label} {name!r}{did_you_mean(name, self.names(kind))}; known {label}s: {known}"
            dist = KNOWN_DISTRIBUTIONS.get((kind, name))
            if dist is not None:
                broken = self.plugins.get(dist)
                if broken is not None and broken.error:
                    message += f". Plugin {dist!r} is installed but failed to load: {broken.error}"
                elif broken is not None and broken.skipped:
                    message += f". Plugin {dist!r} is installed but {broken.skipped}"
                else:
                    message += f". {install_hint(dist)}"
            if kind == "evaluator" and name in self._tables["retrieval_evaluator"]:
                message += (f". {name!r} is a retrieval evaluator (it scores a retriever on a dataset): use "
                            f"create_retrieval_evaluator({name!r}) or 'evret evaluate'")
            message += self._failed_plugins(exclude=dist)
            raise UnknownNameError(message)
        return entry.factory

    def _failed_plugins(self, exclude: str | None) -> str:
        """The installed plugins that failed to import or register, with why: what they register is unknown, so
        an unknown name may be theirs (``exclude``: one already named in the message)."""
        failed = [info for info in self.plugins.values() if not info.builtin and info.name != exclude
                  and info.error and info.error.startswith(("import failed", "registration failed"))]
        if not failed:
            return ""
        described = "; ".join(
            f"plugin {info.name!r} (distribution {info.distribution or info.name}"
            f"{' ' + info.version if info.version else ''}) failed to load: {info.error}" for info in failed)
        return (f". {len(failed)} installed plugin(s) failed to load, so the names they register are unknown: "
                f"{described}")

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

    def plugin_of(self, tb: TracebackType | None) -> PluginInfo | None:
        """The third-party plugin whose code raised, for a one-line report: the innermost frame of ``tb`` in its
        package or in the module of a factory it registered; None for the core's own code."""
        if not self._loaded:
            return None
        owners: dict[str, str] = {}
        for info in self.plugins.values():
            if not info.builtin and info.module:
                owners.setdefault(_top_package(info.module), info.name)
        for table in self._tables.values():
            for entry in table.values():
                if not self.plugins[entry.plugin].builtin:
                    # a lazy("module:Name") factory belongs to its target's package, not to evret_core's
                    where = getattr(entry.factory, "target", None) or getattr(entry.factory, "__module__", "") or ""
                    owners.setdefault(_top_package(str(where)), entry.plugin)
        for core in ("", "evret_core", "builtins", "__main__"):
            owners.pop(core, None)
        found = None
        while tb is not None:
            module = tb.tb_frame.f_globals.get("__name__")
            if isinstance(module, str) and _top_package(module) in owners:
                found = owners[_top_package(module)]
            tb = tb.tb_next
        return self.plugins.get(found) if found else None


def _top_package(module: str) -> str:
    """``evret_bm25`` of ``evret_bm25.plugin`` or of an entry point value ``evret_bm25.plugin:hooks``."""
    return module.partition(":")[0].partition(".")[0].strip()


# Names that well-known distributions register, so an unknown name can say what to install.
KNOWN_DISTRIBUTIONS: dict[tuple[str, str], str] = {
    ("retriever", "bm25"): "evret-bm25",
    ("retriever", "dense"): "evret-sentence-transformers",
    ("retriever", "qdrant"): "evret-qdrant",
    ("retriever", "chroma"): "evret-chroma",
    ("retriever", "pgvector"): "evret-pgvector",
    ("retriever", "milvus"): "evret-milvus",
    ("retriever", "langchain"): "evret-langchain",
    ("retriever", "llamaindex"): "evret-llamaindex",
    ("retriever", "haystack"): "evret-haystack",
    ("retriever", "lancedb"): "evret-lancedb",
    ("retriever", "opensearch"): "evret-opensearch",
    ("judge", "semantic"): "evret-sentence-transformers",
    ("evaluator", "semantic-similarity"): "evret-sentence-transformers",
    ("llm_provider", "openai"): "evret-openai",
    ("llm_provider", "anthropic"): "evret-anthropic",
    ("llm_provider", "google"): "evret-google-genai",
    ("llm_provider", "transformers"): "evret-transformers",
    ("executor", "ray"): "evret-ray",
}


def install_hint(dist: str) -> str:
    """How to install the plugin distribution ``dist``: from its folder in the checkout this evret-core runs from,
    else from a checkout of Evret (the plugins are not on the package index)."""
    from pathlib import Path

    local = Path(__file__).resolve().parents[2] / "plugins" / dist
    if (local / "pyproject.toml").is_file():
        return f"Install it with: pip install {local} (its folder in this checkout)"
    return f"Install it from a checkout of Evret: pip install plugins/{dist} (the plugins are not on PyPI)"


def _dist_version(dist: str) -> str | None:
    import importlib.metadata as md

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
