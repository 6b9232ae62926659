"""Fixtures of the evret-opensearch tests: the wire-format stub server (``opensearch_stub.py`` and its engine
``opensearch_engine.py``, loaded by path: pytest imports test folders in importlib mode) and, when one is available, a real OpenSearch server.

A real server is used when ``EVRET_OPENSEARCH_URL`` names one (the tests create and delete indices named
``evret-test-*`` on it), or when a distribution is found (``opensearch`` on PATH, or ``$OPENSEARCH_HOME/bin``):
it is then started on 127.0.0.1 for the session and stopped afterwards. Otherwise the real-server tests skip, in
CI too, with the reason: no OpenSearch (or Elasticsearch) server can be installed on these machines (none is on
PyPI or in Debian's packages, and distribution tarballs cannot be downloaded).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evret_core.testing.vectorstore_kit import BEE_DOCS, hashed_embedder, write_corpus

HERE = Path(__file__).parent


def _load(name: str) -> Any:
    """A module of this folder by its path (the stub imports its engine by name: loaded first, it is found)."""
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


_load("opensearch_engine")
OpenSearchStub = _load("opensearch_stub").OpenSearchStub

embed = hashed_embedder(128)

NO_SERVER = ("no OpenSearch server: set EVRET_OPENSEARCH_URL (e.g. http://admin:PASSWORD@localhost:9200), or put "
             "a distribution's bin/opensearch on PATH or set OPENSEARCH_HOME; none can be installed here (not on "
             "PyPI or in Debian's packages), so the stub-server tests cover the adapter")


@pytest.fixture
def stub() -> Iterator[Any]:
    with OpenSearchStub() as server:
        yield server


@pytest.fixture
def client(stub: Any) -> Iterator[Any]:
    from opensearchpy import OpenSearch

    os_client = OpenSearch(hosts=[stub.url])
    yield os_client
    os_client.close()


@pytest.fixture
def corpus_file(tmp_path: Path) -> Path:
    return write_corpus(tmp_path / "corpus.jsonl")


@pytest.fixture
def bees(client: Any, corpus_file: Path) -> str:
    """The six bee documents in the index ``bees``: text ``text``, keyword ``doc_id``, cosine ``vector``."""
    from evret_opensearch import index_corpus

    assert index_corpus(client, "bees", corpus_file, embed, batch_size=4) == len(BEE_DOCS)
    return "bees"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def answers(url: str) -> bool:
    """Whether a server answers ``GET url`` with 200."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


@pytest.fixture(scope="session")
def real_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of a real OpenSearch server (see the module docs), or a skip with the reason."""
    url = os.environ.get("EVRET_OPENSEARCH_URL")
    if url:
        yield url
        return
    home = os.environ.get("OPENSEARCH_HOME")
    executable = shutil.which("opensearch") or (str(Path(home) / "bin" / "opensearch") if home else None)
    if not executable or not Path(executable).is_file():
        pytest.skip(NO_SERVER)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        pytest.skip(f"{executable} found, but OpenSearch refuses to run as root: start it as another user and set "
                    f"EVRET_OPENSEARCH_URL")
    with run_distribution(executable, tmp_path_factory.mktemp("opensearch")) as url:
        yield url


@contextlib.contextmanager
def run_distribution(executable: str, root: Path, wait_s: float = 180) -> Iterator[str]:
    """Start an OpenSearch distribution's ``bin/opensearch`` as a single node on a free port of 127.0.0.1 (data
    and logs under ``root``, the security plugin off when it is installed), wait until it answers, yield its URL,
    and stop it."""
    port = _free_port()
    distribution = Path(executable).resolve().parent.parent
    command = [executable, "-Ediscovery.type=single-node", "-Enetwork.host=127.0.0.1", f"-Ehttp.port={port}",
               f"-Epath.data={root / 'data'}", f"-Epath.logs={root / 'logs'}"]
    if (distribution / "plugins" / "opensearch-security").is_dir():
        command.append("-Eplugins.security.disabled=true")
    env = {**os.environ, "OPENSEARCH_JAVA_OPTS": os.environ.get("OPENSEARCH_JAVA_OPTS", "-Xms512m -Xmx512m")}
    with (root / "stdout.log").open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + wait_s
            while not answers(url):
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"{executable} did not start (see {root / 'stdout.log'})")
                time.sleep(0.2)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
