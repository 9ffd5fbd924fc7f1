"""Helpers for the REST integration tests: a model config for several models, and HTTP calls.

Servers are started with ``model_server_process`` (the launcher every model server test uses).
"""

from __future__ import annotations

from typing import Any

import requests


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
