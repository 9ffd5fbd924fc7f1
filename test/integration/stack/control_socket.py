"""The supervisor's control API on its unix socket, as nginx and the Python service use it,
and a model server's own REST predict (to see which process serves a model)."""

from __future__ import annotations

import http.client
import json
import socket
from typing import Any

import requests
from whole_stack import Stack


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float = 180) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


def control(
    stack: Stack, method: str, path: str, body: Any = None, raw: bytes | None = None
) -> tuple[int, Any]:
    connection = UnixConnection(str(stack.work_dir / "supervisor.sock"))
    try:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        headers = {"Content-Type": "application/json"} if data is not None else {}
        connection.request(method, path, body=data, headers=headers)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def load(stack: Stack, name: str, url: str) -> tuple[int, Any]:
    return control(stack, "POST", "/models", {"model_name": name, "url": url})


def predict_direct(rest_port: int, name: str, values: list[float]) -> list[float]:
    response = requests.post(
        f"http://127.0.0.1:{rest_port}/v1/models/{name}:predict",
        json={"instances": values},
        timeout=10,
    )
    assert response.status_code == 200, response.text
    return response.json()["predictions"]
