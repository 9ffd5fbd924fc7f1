"""The image build.sh makes from the unchanged Dockerfile.cpu (see conftest.py for the stand-in
base images it starts from): what SageMaker reads from it and what is, and is not, inside."""

from __future__ import annotations

import pytest
from engine import image_info, podman
from image_scripts import Image

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
        "/opt/venv/bin/python -c 'import sys, sagemaker_tfs.service.app, sagemaker_tfs.wire.protos;"
        ' print("tensorflow" in sys.modules)\'',
    )
    assert out.strip() == "False"
