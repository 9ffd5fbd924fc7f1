"""docker/sbom_image_parts.py: what it adds to the image's SBOM from dpkg's database and the
model server binary (run here on made-up inputs; the container suite reads the real one)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from script_helpers import REPO_ROOT

STATUS = """Package: nginx
Status: install ok installed
Architecture: amd64
Version: 1.26.3-3+deb13u1
Description: small, powerful, scalable web/proxy server
 nginx ("engine X") is a high-performance web and reverse proxy server

Package: removed-one
Status: deinstall ok config-files
Architecture: amd64
Version: 1.0

Package: tzdata
Status: install ok installed
Architecture: all
Version: 2025b-4
"""


def load():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "sbom_image_parts", REPO_ROOT / "docker" / "sbom_image_parts.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_installed_packages_become_deb_components_with_purls() -> None:
    parts = load()
    packages = parts.installed_packages(STATUS)
    assert [p["Package"] for p in packages] == ["nginx", "tzdata"]
    nginx = parts.deb_component(packages[0], "debian", "13")
    assert nginx["purl"] == "pkg:deb/debian/nginx@1.26.3-3%2Bdeb13u1?arch=amd64&distro=debian-13"
    assert (nginx["name"], nginx["version"], nginx["bom-ref"]) == (
        "nginx",
        "1.26.3-3+deb13u1",
        nginx["purl"],
    )


def test_the_sbom_is_completed_in_place(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    parts = load()
    binary = tmp_path / "tensorflow_model_server"
    binary.write_bytes(b"binary")
    status, release = tmp_path / "status", tmp_path / "os-release"
    status.write_text(STATUS)
    release.write_text('ID=debian\nVERSION_ID="13"\n')
    monkeypatch.setattr(parts, "MODEL_SERVER", binary)
    monkeypatch.setattr(parts, "DPKG_STATUS", status)
    monkeypatch.setattr(parts, "OS_RELEASE", release)
    sbom = tmp_path / "sbom.cdx.json"
    python_part = {"name": "numpy", "version": "2.4.6", "type": "library"}
    sbom.write_text(json.dumps({"bomFormat": "CycloneDX", "components": [python_part]}))
    source = "tensorflow/serving:2.21.0"
    assert parts.main(["--model-server", source, "--version", "2.21.0", str(sbom)]) == 0
    document = json.loads(sbom.read_text())
    names = [c["name"] for c in document["components"]]
    assert names == ["numpy", "nginx", "tzdata", "tensorflow_model_server"]
    server = document["components"][-1]
    assert server["purl"] == "pkg:docker/tensorflow/serving@2.21.0"
    assert server["hashes"] == [
        {
            "alg": "SHA-256",
            "content": "9a3a45d01531a20e89ac6ae10b0b0beb0492acd7216a368aa062d1a5fecaf9cd",
        }
    ]
