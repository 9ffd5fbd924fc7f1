"""A user's ``code/inference.py`` in a container of the image under test (conftest.py says what
is substituted): ``requirements.txt`` pip-installed inside the container at start-up, from the
package index (also on a read-only root, as Serverless Inference runs it), and ``code/lib`` put
on the import path instead of any install."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import requests
from engine import podman_succeeds
from image_scripts import REPO_ROOT, Image, start_container
from local_ports import free_port

pytestmark = pytest.mark.slow
CODE = REPO_ROOT / "test" / "resources" / "code"
HALF_PLUS_THREE = REPO_ROOT / "test" / "resources" / "models" / "half_plus_three"


def model_dir_with_code(root: Path, code: str) -> Path:
    shutil.copytree(HALF_PLUS_THREE, root / "half_plus_three")
    shutil.copytree(CODE / code, root / "code")
    return root


def invoke(port: int, body: str) -> requests.Response:
    return requests.post(
        f"http://127.0.0.1:{port}/invocations",
        data=body,
        headers={"Content-Type": "application/json"},
        timeout=60,
    )


def test_requirements_installed_from_the_index_at_start_up(
    image_under_test: Image, built_image: Image, bin_dir: Path, tmp_path: Path, ca_bundle
) -> None:
    in_image = podman_succeeds("run", "--rm", built_image.name, "python", "-c", "import tabulate")
    assert not in_image, "tabulate must not be in the image for this test to mean anything"
    model_dir = model_dir_with_code(tmp_path, "with_pypi_requirement")
    container = start_container(
        image_under_test, bin_dir, free_port(), model_dir, ca_bundle=ca_bundle
    )
    try:
        response = invoke(container.port, "[[1, 2], [3, 4]]")
        assert response.status_code == 200, response.text
        assert response.json() == {"table": "1  2\n3  4", "version": "0.9.0"}
        assert "installing /opt/ml/model/code/requirements.txt" in container.logs()
    finally:
        assert container.stop().returncode == 0


def test_requirements_installed_on_a_read_only_root_with_only_tmp_writable(
    image_under_test: Image, bin_dir: Path, tmp_path: Path, ca_bundle
) -> None:
    """Serverless Inference's filesystem (``start.sh --serverless``): the packages go to the
    work directory under /tmp, and the handler imports them."""
    model_dir = model_dir_with_code(tmp_path, "with_pypi_requirement")
    container = start_container(
        image_under_test, bin_dir, free_port(), model_dir, ca_bundle=ca_bundle,
        serverless_memory="2g",
    )  # fmt: skip
    try:
        assert container.exec("sh", "-c", "touch /opt/probe 2>/dev/null || echo ro") == "ro\n"
        response = invoke(container.port, "[[1, 2], [3, 4]]")
        assert response.status_code == 200, response.text
        assert response.json() == {"table": "1  2\n3  4", "version": "0.9.0"}
        assert "into /tmp/sagemaker-tfs/user_packages" in container.logs()
    finally:
        assert container.stop().returncode == 0


def test_code_lib_is_imported_and_requirements_are_not_installed(
    image_under_test: Image, bin_dir: Path, tmp_path: Path
) -> None:
    model_dir = model_dir_with_code(tmp_path, "with_lib")
    container = start_container(image_under_test, bin_dir, free_port(), model_dir)
    try:
        response = invoke(container.port, "[1.0]")
        assert response.status_code == 200, response.text
        assert response.json() == {"lib": "from code/lib"}
    finally:
        assert container.stop().returncode == 0
