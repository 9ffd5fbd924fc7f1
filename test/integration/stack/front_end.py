"""nginx + njs + the Python service (gunicorn), in front of a recording REST server.

The whole-stack tests (``start_stack``) need the model server; these front-end tests check
what nginx and the service *send* to it, which a real model server cannot tell us. So the
model server's REST API is replaced here by ``RecordingModelServer``: it records each
request and answers with TF Serving's shapes (model status for GET, a pretty-printed JSON
echo of the request for POST). nginx and gunicorn are the real processes on free ports.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import requests
from local_ports import free_port
from sagemaker_tfs.config import load_config
from sagemaker_tfs.ports import Instance
from sagemaker_tfs.stack_config import StackConfig
from sagemaker_tfs.supervisor import nginx_config
from whole_stack import http_post

REPO_ROOT = Path(__file__).resolve().parents[3]
EXAMPLE_MODELS = REPO_ROOT / "test" / "resources" / "models"
START_TIMEOUT_SECONDS = 60.0


@dataclass
class Recorded:
    method: str
    path: str
    body: bytes
    headers: dict[str, str]


@dataclass
class RecordingModelServer:
    """Stands in for a model server's REST port: records requests, answers like TF Serving."""

    available: set[str] = field(default_factory=set)
    requests: list[Recorded] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    @property
    def port(self) -> int:
        assert self.server is not None
        return self.server.server_address[1]

    def start(self) -> None:
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body are two writes

            def _record(self) -> Recorded:
                length = int(self.headers.get("Content-Length") or 0)
                entry = Recorded(
                    self.command, self.path, self.rfile.read(length), dict(self.headers)
                )
                recorder.requests.append(entry)
                return entry

            def _answer(self, status: int, payload: object) -> None:
                data = json.dumps(payload, indent=4).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802
                self._record()
                name = self.path.rsplit("/", 1)[-1]
                if name in recorder.available:
                    status = [{"version": "1", "state": "AVAILABLE", "status": {}}]
                    self._answer(200, {"model_version_status": status})
                else:
                    self._answer(404, {"error": f"Could not find any versions of model {name}"})

            def do_POST(self) -> None:  # noqa: N802
                entry = self._record()
                name = entry.path.split("/")[3].split(":")[0]
                if name not in recorder.available:
                    self._answer(404, {"error": f"Servable not found for request: Latest({name})"})
                    return
                try:
                    request = json.loads(entry.body)
                except ValueError:
                    self._answer(400, {"error": "JSON Parse error: not JSON"})
                    return
                self._answer(200, {"path": entry.path, "request": request})

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def last(self) -> Recorded:
        posts = [r for r in self.requests if r.method == "POST"]
        assert posts, "the model server received no POST"
        return posts[-1]


@dataclass
class FrontEnd:
    url: str
    config: StackConfig
    recorder: RecordingModelServer
    processes: dict[str, subprocess.Popen[bytes]]
    work_dir: Path

    def log(self, name: str) -> str:
        return (self.work_dir / f"{name}.log").read_text(errors="replace")

    def post(self, body: bytes | str, content_type: str | None = "application/json",
             path: str = "/invocations", **headers: str) -> requests.Response:  # fmt: skip
        # Generous: converting megabytes in njs and echoing them takes a while on a loaded machine.
        return http_post(self.url + path, body, content_type, headers, timeout=120)

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self.recorder.stop()


def _spawn(argv: list[str], env: dict[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    with open(log_path, "wb") as log_file:
        return subprocess.Popen(
            argv, env=env, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True
        )


def _wait(condition, what: str, front: FrontEnd) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while not condition():
        for name, process in front.processes.items():
            if process.poll() is not None:
                front.stop()
                raise RuntimeError(f"{name} exited during start-up:\n{front.log(name)[-4000:]}")
        if time.monotonic() > deadline:
            front.stop()
            raise RuntimeError(f"{what} not ready in time")
        time.sleep(0.1)


def _up(url: str) -> bool:
    try:
        requests.get(url, timeout=1)
        return True
    except requests.RequestException:
        return False


def start_front_end(
    work_dir: Path,
    model_dir: Path = EXAMPLE_MODELS,
    env: dict[str, str] | None = None,
    multi_model: bool = False,
    **changes: object,
) -> FrontEnd:
    """Start the recorder, gunicorn (create_app) and nginx for ``model_dir`` and ``env``."""
    recorder = RecordingModelServer()
    recorder.start()
    environ = dict(env or {})
    if multi_model:
        environ["SAGEMAKER_MULTI_MODEL"] = "true"
    config = load_config(environ, model_dir=str(model_dir), work_dir=str(work_dir),
                         port=free_port())  # fmt: skip
    if not multi_model:
        changes.setdefault("instances", (Instance(free_port(), recorder.port),))
        recorder.available.update(m.name for m in config.models)
    config = dataclasses.replace(config, **changes)  # type: ignore[arg-type]
    config_path = work_dir / "stack.json"
    config_path.write_text(config.to_json())
    child_env = dict(os.environ, SAGEMAKER_TFS_STACK_CONFIG=str(config_path))
    gunicorn = [
        sys.executable, "-m", "gunicorn", f"--bind=unix:{config.work.service_socket}",
        f"--workers={config.service.workers}", f"--worker-class={config.service.worker_class}",
        f"--timeout={config.service.timeout}",
        "--config=python:sagemaker_tfs.service.edge.gunicorn_hooks",
        "sagemaker_tfs.service.edge.app:create_app()",
    ]  # fmt: skip
    nginx_path = work_dir / "nginx.conf"
    nginx_path.write_text(nginx_config.render(config))
    nginx = ["nginx", "-p", f"{work_dir}/", "-c", str(nginx_path), "-e", "stderr"]
    front = FrontEnd(f"http://127.0.0.1:{config.port}", config, recorder, {}, work_dir)
    front.processes["gunicorn"] = _spawn(gunicorn, child_env, work_dir / "gunicorn.log")
    _wait(lambda: os.path.exists(config.work.service_socket), "gunicorn", front)
    front.processes["nginx"] = _spawn(nginx, child_env, work_dir / "nginx.log")
    _wait(lambda: _up(front.url + "/execution-parameters"), "nginx", front)
    return front
