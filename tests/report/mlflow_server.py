"""A small MLflow tracking server for the tests: the REST API 2.0 calls and the ``mlflow-artifacts`` uploads that
MLflow's own client makes to log one run, on 127.0.0.1 in a thread.

The first path segment of the tracking URI picks the behaviour (``http://127.0.0.1:PORT/MODE``):

- ``ok``: a working server (experiments, runs, params, metrics, tags and artifacts are kept in memory);
- ``r500``: every request answers HTTP 500;
- ``hang``: no request is ever answered (until the server stops);
- ``echo401``: every request answers 401 with the Authorization header it got in the message;
- ``late500`` / ``latehang``: the experiment is found (a check before the work passes), every later request
  answers 500 / is never answered;
- ``deleted``: every experiment asked for by name exists and is deleted.

Every request is recorded (``requests``: method, path, Authorization header, body) so a test can say what was
sent and when.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

MODES = ("ok", "r500", "hang", "echo401", "late500", "latehang", "deleted")


class MlflowServer:
    """``with MlflowServer() as server: server.uri("ok")``; see the module docs."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.experiments: dict[str, str] = {}  # name -> id
        self.runs: dict[str, dict[str, Any]] = {}  # run id -> {"info", "params", "metrics", "tags"}
        self.artifacts: dict[str, bytes] = {}  # path under the artifact root -> content
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def uri(self, mode: str, userinfo: str = "") -> str:
        """The tracking URI of ``mode``, with ``user:password@`` when ``userinfo`` is given."""
        assert mode in MODES, mode
        return f"http://{userinfo + '@' if userinfo else ''}127.0.0.1:{self.port}/{mode}"

    def __enter__(self) -> MlflowServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()  # hanging requests return now
        self._server.shutdown()
        self._server.server_close()

    # -- the API ---------------------------------------------------------------------------------------------------
    def _run(self, run_id: str) -> dict[str, Any]:
        run = self.runs[run_id]
        data = {"params": [{"key": k, "value": v} for k, v in run["params"].items()],
                "metrics": [{"key": k, "value": v, "timestamp": 0, "step": 0} for k, v in run["metrics"].items()],
                "tags": [{"key": k, "value": v} for k, v in run["tags"].items()]}
        return {"info": run["info"], "data": data}

    def answer(self, mode: str, method: str, endpoint: str, query: dict[str, list[str]], body: Any,
               raw: bytes) -> tuple[int, Any]:
        """(status, JSON body) for one request of ``mode`` (None body: never answer)."""
        by_name = endpoint.endswith("experiments/get-by-name")
        if mode == "hang" or (mode == "latehang" and not by_name):
            return 0, None
        if mode == "r500" or (mode == "late500" and not by_name):
            return 500, {"error_code": "INTERNAL_ERROR", "message": "the store is down"}
        if by_name:
            name = query.get("experiment_name", ["Default"])[0]
            if mode == "deleted":
                return 200, {"experiment": {"experiment_id": "7", "name": name, "lifecycle_stage": "deleted",
                                            "artifact_location": "mlflow-artifacts:/7"}}
            if name not in self.experiments:
                return 404, {"error_code": "RESOURCE_DOES_NOT_EXIST", "message": f"no experiment {name!r}"}
            return 200, {"experiment": {"experiment_id": self.experiments[name], "name": name,
                                        "lifecycle_stage": "active",
                                        "artifact_location": f"mlflow-artifacts:/{self.experiments[name]}"}}
        if endpoint.endswith("experiments/create"):
            self.experiments[body["name"]] = str(len(self.experiments) + 1)
            return 200, {"experiment_id": self.experiments[body["name"]]}
        if endpoint.endswith("runs/create"):
            run_id = uuid.uuid4().hex
            info = {"run_id": run_id, "run_uuid": run_id, "experiment_id": body["experiment_id"],
                    "run_name": body.get("run_name") or "stub-run", "status": "RUNNING", "start_time": 1,
                    "artifact_uri": f"mlflow-artifacts:/{body['experiment_id']}/{run_id}/artifacts",
                    "lifecycle_stage": "active", "user_id": "u"}
            self.runs[run_id] = {"info": info, "params": {}, "metrics": {},
                                 "tags": {t["key"]: t["value"] for t in body.get("tags", [])}}
            return 200, {"run": self._run(run_id)}
        if endpoint.endswith("runs/get"):
            return 200, {"run": self._run(query["run_id"][0])}
        if endpoint.endswith("runs/log-batch"):
            run = self.runs[body["run_id"]]
            run["params"].update({p["key"]: p["value"] for p in body.get("params", [])})
            run["metrics"].update({m["key"]: m["value"] for m in body.get("metrics", [])})
            run["tags"].update({t["key"]: t["value"] for t in body.get("tags", [])})
            return 200, {}
        if endpoint.endswith("runs/update"):
            info = self.runs[body["run_id"]]["info"]
            info["status"] = body.get("status", info["status"])
            return 200, {"run_info": info}
        if "/mlflow-artifacts/artifacts/" in endpoint and method == "PUT":
            self.artifacts[endpoint.split("/mlflow-artifacts/artifacts/", 1)[1]] = raw
            return 200, {}
        return 200, {}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def handle_any(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(size) if size else b""
                parts = urlsplit(self.path)
                mode, _, endpoint = parts.path.lstrip("/").partition("/")
                auth = self.headers.get("Authorization")
                try:
                    body = json.loads(raw) if raw and "mlflow-artifacts" not in endpoint else None
                except ValueError:
                    body = None
                with server._lock:
                    server.requests.append({"t": time.monotonic(), "method": self.command, "path": self.path,
                                            "auth": auth, "body": raw})
                    if mode == "echo401":
                        status, answer = 401, {"error_code": "UNAUTHENTICATED", "message": f"bad credentials {auth}"}
                    else:
                        status, answer = server.answer(mode, self.command, endpoint, parse_qs(parts.query), body,
                                                       raw)
                if answer is None:
                    server._stop.wait(3600)
                    return
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_any

        return Handler
