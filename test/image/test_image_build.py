"""The image build.sh makes from the unchanged Dockerfile.cpu (see conftest.py for the stand-in
base images it starts from): what SageMaker reads from it and what is, and is not, inside."""

from __future__ import annotations

import json
import re

import pytest
from engine import image_info, podman, podman_succeeds
from image_scripts import REPO_ROOT, Image

pytestmark = pytest.mark.slow


def run_in(image: Image, script: str) -> str:
    return podman("run", "--rm", "--entrypoint", "/bin/sh", image.name, "-c", script)


def test_both_tags_name_one_image(built_image: Image) -> None:
    short_tag = f"{built_image.repository}:{built_image.short_version}-cpu"
    assert image_info(built_image.name)["Id"] == image_info(short_tag)["Id"]


def test_sagemaker_reads_labels_port_and_command(built_image: Image) -> None:
    config = image_info(built_image.name)["Config"]
    labels = config["Labels"]
    assert labels["com.amazonaws.sagemaker.capabilities.accept-bind-to-port"] == "true"
    assert labels["com.amazonaws.sagemaker.capabilities.multi-models"] == "true"
    assert labels["com.amazonaws.sagemaker.capabilities.bidirectional-streaming"] == "true"
    assert labels["org.opencontainers.image.version"] == built_image.version
    assert "8080/tcp" in config["ExposedPorts"]
    assert config["Cmd"] == ["serve"]
    assert not config.get("Entrypoint"), "SageMaker runs `docker run IMAGE serve`"
    assert "/opt/venv/bin" in next(e for e in config["Env"] if e.startswith("PATH="))


def test_runs_on_debian_13_with_its_python_nginx_and_njs(built_image: Image) -> None:
    out = run_in(
        built_image,
        ". /etc/os-release && echo $VERSION_CODENAME"
        " && /opt/venv/bin/python -c 'import sys; print(sys.version_info[:2])'"
        " && dpkg-query -W -f '${Version}\\n' libnginx-mod-http-js"
        " && test -f /usr/lib/nginx/modules/ngx_http_js_module.so && echo njs-module"
        " && command -v serve",
    ).split("\n")
    assert out[0] == "trixie"
    assert out[1] == "(3, 13)"
    assert out[2].startswith("0.8."), f"njs {out[2]}"
    assert out[3:5] == ["njs-module", "/opt/venv/bin/serve"]


def test_model_server_binary_is_where_the_supervisor_looks(built_image: Image) -> None:
    out = run_in(built_image, "test -x /usr/bin/tensorflow_model_server && echo ok")
    assert out.strip() == "ok"


def test_no_compilers_caches_certificates_or_tensorflow(built_image: Image) -> None:
    """pip stays in /opt/venv: code/requirements.txt is installed with it at start-up."""
    out = run_in(
        built_image,
        "for tool in gcc cc make; do command -v $tool; done;"
        " ls /var/lib/apt/lists | grep -v '^lock$' | grep -v '^partial$';"
        " ls /root/.cache /tmp/wheels /tmp/build-env 2>/dev/null; ls -A /run/secrets 2>/dev/null;"
        " env | grep '^PIP_CERT';"
        " /opt/venv/bin/python -c 'import tensorflow' 2>/dev/null && echo tensorflow;"
        " echo end",
    )
    assert out.strip() == "end", f"found in the image: {out}"


def test_service_imports_from_the_venv_without_tensorflow(built_image: Image) -> None:
    out = run_in(
        built_image,
        "/opt/venv/bin/python -c 'import sys, sagemaker_tfs.service.edge.app,"
        " sagemaker_tfs.wire.protos;"
        ' print("tensorflow" in sys.modules)\'',
    )
    assert out.strip() == "False"


SBOM = "/usr/share/sagemaker-tfs/sbom.cdx.json"


def locked_versions() -> dict[str, str]:
    """``name -> version`` of docker/requirements.lock (names normalized as pip lists them)."""
    pins = {}
    for match in re.finditer(
        r"^([A-Za-z0-9_.\-]+)==([^\s;\\]+)",
        (REPO_ROOT / "docker/requirements.lock").read_text(),
        re.M,
    ):
        pins[re.sub(r"[-_.]+", "-", match.group(1)).lower()] = match.group(2)
    return pins


def test_the_venv_holds_exactly_the_locked_distributions(built_image: Image) -> None:
    """What the hash-checked install put in /opt/venv: the lock's versions (those that apply on
    Linux), pip itself and the project; no tensorflow-serving-api."""
    listed = json.loads(run_in(built_image, "/opt/venv/bin/pip list --format json 2>/dev/null"))
    installed = {re.sub(r"[-_.]+", "-", d["name"]).lower(): d["version"] for d in listed}
    locked = locked_versions()
    assert set(installed) - set(locked) == {"pip", "sagemaker-tfs"}
    for name, version in installed.items():
        assert name in ("pip", "sagemaker-tfs") or locked[name] == version, name
    assert set(locked) - set(installed) <= {"cffi", "pycparser"}  # Windows only (markers)


def test_the_sbom_lists_the_python_distributions_packages_and_model_server(
    built_image: Image,
) -> None:
    document = json.loads(run_in(built_image, f"cat {SBOM}"))
    assert document["bomFormat"] == "CycloneDX"
    debs = {c["name"]: c for c in document["components"] if "pkg:deb/" in c.get("purl", "")}
    python = {c["name"]: c for c in document["components"] if "pkg:deb/" not in c.get("purl", "")}
    locked = locked_versions()
    for name in ("numpy", "grpcio", "gevent"):
        assert python[name]["version"] == locked[name]
        assert python[name]["purl"] == f"pkg:pypi/{name}@{locked[name]}"
    assert "sagemaker-tfs" in python  # built from the context: no PyPI purl
    version = run_in(built_image, "dpkg-query -W -f '${Version}' nginx")
    assert debs["nginx"]["version"] == version
    assert debs["nginx"]["purl"].startswith("pkg:deb/debian/nginx@")
    server = next(c for c in document["components"] if c["name"] == "tensorflow_model_server")
    digest = run_in(built_image, "sha256sum /usr/bin/tensorflow_model_server").split()[0]
    assert server["hashes"] == [{"alg": "SHA-256", "content": digest}]
    assert server["purl"] == f"pkg:docker/tensorflow/serving@{built_image.version}"


def test_the_smoke_stage_ran_and_fails_a_broken_image(built_image: Image) -> None:
    """The build ran docker/smoke_test.sh as its last step; the same script, run in the image
    with a model server binary that cannot answer, fails."""
    history = podman("history", "--no-trunc", "--format", "{{.CreatedBy}}", built_image.name)
    assert "sh /tmp/smoke_test.sh" in history.splitlines()[0]
    script = REPO_ROOT / "docker" / "smoke_test.sh"
    run = ["run", "--rm", "--mount", f"type=bind,source={script},target=/tmp/smoke_test.sh,ro"]
    check = ["--entrypoint", "/bin/sh", built_image.name, "/tmp/smoke_test.sh"]
    assert podman(*run, *check).rstrip().endswith("smoke test: passed")
    no_answer = "type=bind,source=/bin/false,target=/usr/bin/tensorflow_model_server,ro"
    assert not podman_succeeds(*run, "--mount", no_answer, *check)
