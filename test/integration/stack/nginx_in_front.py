"""The real nginx with the stack's configuration in front of stand-ins (for the tests that put
a stand-in for gunicorn or for a model server behind it), a stand-in's unix socket, and the
real gunicorn as the supervisor starts it; a model server that refuses until it is back."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol, TypeVar

import grpc
from front_end import EXAMPLE_MODELS
from local_ports import free_port
from sagemaker_tfs.config import load_config
from sagemaker_tfs.ports import Instance
from sagemaker_tfs.service.routing.connections import Channels
from sagemaker_tfs.stack_config import STACK_CONFIG_ENV, StackConfig
from sagemaker_tfs.supervisor import nginx_config
from sagemaker_tfs.supervisor.service_launcher import gunicorn_command


def start_nginx(config: StackConfig) -> subprocess.Popen[bytes]:
    """nginx with ``config``'s nginx.conf, once its public port takes connections."""
    conf = Path(config.work.root) / "nginx.conf"
    conf.write_text(nginx_config.render(config))
    nginx = subprocess.Popen(
        ["nginx", "-p", f"{config.work.root}/", "-c", str(conf), "-e", "stderr"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", config.port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    return nginx


def stop_nginx(nginx: subprocess.Popen[bytes]) -> None:
    nginx.terminate()
    nginx.wait(10)


def start_gunicorn(config: StackConfig, **popen: object) -> subprocess.Popen[bytes]:
    """gunicorn on a socket held for it, with the supervisor's command line, once a worker
    has loaded the app (``popen``: more arguments for Popen, e.g. where its log goes)."""
    config_path = Path(config.work.root) / "stack.json"
    config_path.write_text(config.to_json())
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(config.work.service_socket)
    listener.listen(64)
    env = dict(os.environ, **{STACK_CONFIG_ENV: str(config_path)})
    options: dict = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, **popen}
    gunicorn = subprocess.Popen(
        gunicorn_command(config, listener.fileno()), pass_fds=(listener.fileno(),), env=env,
        start_new_session=True, **options,
    )  # fmt: skip
    listener.close()
    ready = Path(config.work.service_ready_marker(gunicorn.pid))
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert gunicorn.poll() is None and time.monotonic() < deadline, "gunicorn did not start"
        time.sleep(0.1)
    return gunicorn


def stop_gunicorn(gunicorn: subprocess.Popen[bytes]) -> None:
    os.killpg(gunicorn.pid, signal.SIGKILL)
    gunicorn.wait()


class StandIn(Protocol):
    """A stand-in model server: its REST port, and ``close``."""

    @property
    def rest_port(self) -> int: ...

    def close(self) -> None: ...


StandInT = TypeVar("StandInT", bound=StandIn)


@contextlib.contextmanager
def nginx_and_gunicorn_before(
    tmp_path: Path, inference_py: str | None, stand_in: Callable[[str], StandInT]
) -> Iterator[tuple[int, StandInT]]:
    """nginx and gunicorn serving half_plus_three (with ``inference_py`` as its
    ``code/inference.py`` when given) in front of the model server ``stand_in`` makes for the
    gRPC target it is given; yields the public port and that model server."""
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "half_plus_three").symlink_to(EXAMPLE_MODELS / "half_plus_three")
    if inference_py is not None:
        (model_dir / "code").mkdir()
        (model_dir / "code" / "inference.py").write_text(inference_py)
    config = load_config({}, model_dir=str(model_dir), work_dir=str(tmp_path / "w"),
                         port=free_port())  # fmt: skip
    grpc_port = free_port()
    Path(config.work.root).mkdir(parents=True)
    model_server = stand_in(Channels(config.work.grpc_socket_path).target(grpc_port))
    config = dataclasses.replace(config, instances=(Instance(grpc_port, model_server.rest_port),))
    gunicorn = start_gunicorn(config)
    nginx = start_nginx(config)
    try:
        yield config.port, model_server
    finally:
        stop_nginx(nginx)
        stop_gunicorn(gunicorn)
        model_server.close()


class UnixStandIn:
    """An HTTP server on a unix socket: a thread per connection runs ``serve(connection,
    number)``, ``number`` counting the connections from 1 in the order they were accepted."""

    def __init__(self, path: str) -> None:
        self.connections = 0
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(64)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(
                target=self._serve_and_close, args=(connection, self.connections), daemon=True
            ).start()

    def _serve_and_close(self, connection: socket.socket, number: int) -> None:
        with connection:
            self.serve(connection, number)

    def serve(self, connection: socket.socket, number: int) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self.listener.close()


def read_request(connection: socket.socket) -> bytes | None:
    """One request read whole (head and Content-Length body); None at the end."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = connection.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    length = next(
        (int(line.split(b":")[1]) for line in head.split(b"\r\n")
         if line.lower().startswith(b"content-length:")),
        0,
    )  # fmt: skip
    while len(body) < length:
        chunk = connection.recv(65536)
        if not chunk:
            return None
        body += chunk
        data += chunk
    return data


def answer_json(connection: socket.socket, body: bytes) -> None:
    """A 200 with a JSON ``body``."""
    head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    connection.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)


MODEL_ANSWER = b'{"predictions": [3.5]}'


class RestartingModelServer:
    """A model server's REST port and gRPC socket that refuse every call as a restarting one
    does until ``back``; then REST answers MODEL_ANSWER and gRPC NOT_FOUND (the service then
    posts the JSON over REST). ``posts``: the REST bodies; ``grpc_calls``: their count."""

    def __init__(self, grpc_target: str) -> None:
        self.back = False
        self.posts: list[bytes] = []
        self.grpc_calls = 0
        self.rest = ThreadingHTTPServer(("127.0.0.1", 0), self._rest_handler())
        self.rest.daemon_threads = True
        threading.Thread(target=self.rest.serve_forever, daemon=True).start()
        self.grpc = grpc.server(ThreadPoolExecutor(4))
        self.grpc.add_generic_rpc_handlers([_Refusing(self)])
        self.grpc.add_insecure_port(grpc_target)
        self.grpc.start()

    def _rest_handler(self) -> type[BaseHTTPRequestHandler]:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802
                owner.posts.append(self.rfile.read(int(self.headers["Content-Length"])))
                status, body = (200, MODEL_ANSWER) if owner.back else (503, b'{"error": "x"}')
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass

        return Handler

    @property
    def rest_port(self) -> int:
        return self.rest.server_address[1]

    def close(self) -> None:
        self.grpc.stop(0)
        self.rest.shutdown()
        self.rest.server_close()


class _Refusing(grpc.GenericRpcHandler):
    def __init__(self, owner: RestartingModelServer) -> None:
        self.owner = owner

    def service(self, details: Any) -> grpc.RpcMethodHandler:
        return grpc.unary_unary_rpc_method_handler(self.call)

    def call(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        self.owner.grpc_calls += 1
        if self.owner.back:
            context.abort(grpc.StatusCode.NOT_FOUND, "no such model")
        context.abort(grpc.StatusCode.UNAVAILABLE, "the model server is restarting")


def send_invocation(port: int, body: bytes) -> socket.socket:
    """An invocation sent on a raw connection, its answer not read."""
    connection = socket.create_connection(("127.0.0.1", port))
    head = "POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    connection.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
    return connection
