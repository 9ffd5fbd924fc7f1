"""Helpers for the REST integration tests: a module-scoped real server and HTTP calls.

The server is started with ``launch_model_server``/``wait_until_ready`` from this directory's
conftest (the core engineer's launcher), loaded under its own module name so it does not clash
with the other ``conftest`` modules.
"""

from __future__ import annotations

import importlib.util
import signal
import subprocess
from pathlib import Path
from typing import Any

import requests

_LAUNCHER_PATH = Path(__file__).with_name("conftest.py")


def _launcher() -> Any:
    spec = importlib.util.spec_from_file_location("model_server_launcher", _LAUNCHER_PATH)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def start_server(args: list[str], log_path: Path) -> Any:
    """Start ``sagemaker-tfs model-server`` with ``args`` on free ports and wait until ready."""
    launcher = _launcher()
    handle = launcher.launch_model_server(tuple(args), log_path)
    try:
        launcher.wait_until_ready(handle)
    except BaseException:
        stop_server(handle)
        raise
    return handle


def stop_server(handle: Any) -> None:
    if handle.process.poll() is None:
        handle.process.send_signal(signal.SIGTERM)
        try:
            handle.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            handle.process.kill()
            handle.process.wait()


def model_config(models: list[dict[str, Any]]) -> str:
    """Text-format ModelServerConfig for ``[{name, base_path, versions?, labels?}]``."""
    blocks = []
    for model in models:
        lines = [f"    name: '{model['name']}'", f"    base_path: '{model['base_path']}'"]
        lines.append("    model_platform: 'tensorflow'")
        if "versions" in model:
            versions = " ".join(f"versions: {v}" for v in model["versions"])
            lines.append(f"    model_version_policy: {{ specific: {{ {versions} }} }}")
        for label, version in model.get("labels", {}).items():
            lines.append(f"    version_labels {{ key: '{label}' value: {version} }}")
        blocks.append("  config: {\n" + "\n".join(lines) + "\n  }")
    return "model_config_list: {\n" + "\n".join(blocks) + "\n}\n"


class RestClient:
    """Raw HTTP calls to one server over a keep-alive session."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.session = requests.Session()

    def post(self, path: str, body: bytes | str) -> requests.Response:
        data = body.encode() if isinstance(body, str) else body
        return self.session.post(self.base_url + path, data=data, timeout=60)

    def get(self, path: str) -> requests.Response:
        return self.session.get(self.base_url + path, timeout=60)

    def request(self, method: str, path: str, body: bytes = b"") -> requests.Response:
        return self.session.request(method, self.base_url + path, data=body, timeout=60)
