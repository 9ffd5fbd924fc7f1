"""The real nginx with the stack's configuration in front of stand-ins (for the tests that put
a stand-in for gunicorn or for a model server behind it), a stand-in's unix socket, and the
real gunicorn as the supervisor starts it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

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
