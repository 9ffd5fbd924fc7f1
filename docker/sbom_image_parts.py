"""Adds what cyclonedx-py cannot see to the image's SBOM: the distribution's packages (from
dpkg's database) and the model server binary (its source and sha256).

Run in the image build (the Dockerfile's runtime stage) with the image's own Python, standard
library only: ``sbom_image_parts.py --model-server SOURCE --version VERSION SBOM``, where
SBOM is the CycloneDX JSON that ``cyclonedx-py environment`` wrote for /opt/venv.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from urllib.parse import quote

DPKG_STATUS = Path("/var/lib/dpkg/status")
OS_RELEASE = Path("/etc/os-release")
MODEL_SERVER = Path("/usr/bin/tensorflow_model_server")


def os_release(path: Path = OS_RELEASE) -> dict[str, str]:
    fields = {}
    for line in path.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep:
            fields[key] = value.strip().strip('"')
    return fields


def installed_packages(status: str) -> list[dict[str, str]]:
    """The ``Package``, ``Version`` and ``Architecture`` of each installed package."""
    packages = []
    for paragraph in status.split("\n\n"):
        fields = {}
        for line in paragraph.splitlines():
            key, sep, value = line.partition(": ")
            if sep and not line.startswith(" "):
                fields[key] = value
        if fields.get("Status", "").endswith(" installed") and "Package" in fields:
            packages.append(fields)
    return packages


def deb_component(package: dict[str, str], distro: str, distro_version: str) -> dict:
    name, version = package["Package"], package["Version"]
    arch = package.get("Architecture", "all")
    purl = (
        f"pkg:deb/{distro}/{quote(name)}@{quote(version, safe='.-_~')}"
        f"?arch={arch}&distro={distro}-{distro_version}"
    )
    return {"type": "library", "bom-ref": purl, "name": name, "version": version, "purl": purl}


def model_server_component(source: str, version: str, binary: Path) -> dict:
    """The binary, named after where it came from: an image (``REPOSITORY:TAG``) or a file."""
    digest = hashlib.sha256(binary.read_bytes()).hexdigest()
    component = {
        "type": "application",
        "bom-ref": f"model-server:{source}",
        "name": "tensorflow_model_server",
        "version": version,
        "description": f"{binary} from {source}",
        "hashes": [{"alg": "SHA-256", "content": digest}],
    }
    repository, sep, tag = source.rpartition(":")
    if sep and "/" in repository:
        component["purl"] = f"pkg:docker/{repository}@{tag}"
    return component


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-server", required=True, help="the binary's image or file")
    parser.add_argument("--version", required=True, help="the TF Serving release")
    parser.add_argument("sbom", type=Path, help="cyclonedx-py's JSON, completed in place")
    args = parser.parse_args(argv)
    document = json.loads(args.sbom.read_text())
    release = os_release()
    distro, distro_version = release.get("ID", "linux"), release.get("VERSION_ID", "")
    components = document.setdefault("components", [])
    components += [
        deb_component(package, distro, distro_version)
        for package in installed_packages(DPKG_STATUS.read_text())
    ]
    components.append(model_server_component(args.model_server, args.version, MODEL_SERVER))
    args.sbom.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
