"""The container suite: the CPU image built from the unchanged ``docker/<newest>/Dockerfile.cpu``
with ``scripts/build.sh``, and containers of it started, called and stopped with the real
``scripts/start.sh``, ``curl.sh`` and ``stop.sh``, ``docker`` being Debian's podman.

What is substituted, and why (nothing else differs from what a user builds and runs):

- ``debian:trixie-slim`` is made here with debootstrap (``base_images.py``) as the official
  image is made, because no image registry is reachable.
- ``tensorflow/serving:<newest>`` is a stand-in for the same reason: its
  ``/usr/bin/tensorflow_model_server``, the one file the Dockerfile copies out of it, is a
  script running the project's Python model server (``sagemaker-tfs model-server``, the same
  flags) instead of TF Serving's C++ binary.
- That model server needs TensorFlow, which one copied file cannot carry, so the containers
  run ``sagemaker-tfs-under-test:<newest>-cpu``: the built image plus one test-only layer
  with TensorFlow in ``/opt/model-server-packages`` (``stand_in/Dockerfile.model-server-layer``).
  ``/opt/venv``, nginx, ``serve`` and everything else are the built image's, untouched; the
  image tests in ``test_image_build.py`` look at the built image itself.

pip inside the build and at container start-up reaches the package index through this
machine's TLS proxy: the host's CA bundle is mounted read-only and named in ``PIP_CERT``
(``--ca-bundle``), never copied into an image.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from base_images import (
    build_model_server_layer,
    ensure_debian_image,
    ensure_stand_in_serving_image,
    host_ca_bundle,
    require_tools,
)
from engine import image_info, noting_replaced_images, remove_images
from image_scripts import REPO_ROOT, Image, newest_version, run_script, script_env, tail

REPOSITORY = "sagemaker-tensorflow-serving"
UNDER_TEST_REPOSITORY = "sagemaker-tfs-under-test"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def bin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Holds the ``docker`` that is podman, first on the scripts' PATH."""
    return tmp_path_factory.mktemp("bin")


@pytest.fixture(scope="session")
def ca_bundle() -> Path | None:
    return host_ca_bundle()


@pytest.fixture(scope="session")
def replaced_images() -> Iterator[list[str]]:
    """The images this session's builds took the tags from, removed when the session ends
    (the newest first, children before their parents): each rebuild of the image under test
    would otherwise leave 2.5 GB of untagged image behind."""
    replaced: list[str] = []
    yield replaced
    remove_images(reversed(replaced))


@pytest.fixture(scope="session")
def built_image(bin_dir: Path, ca_bundle: Path | None, replaced_images: list[str]) -> Image:
    """The CPU image as ``scripts/build.sh`` builds it (no AWS credentials: uncached)."""
    missing = require_tools()
    if missing:
        pytest.fail(f"missing {', '.join(missing)}: run scripts/bootstrap.sh --engine")
    version = newest_version()
    ensure_debian_image()
    ensure_stand_in_serving_image(version)
    args = ["--version", version, "--arch", "cpu"]
    if ca_bundle is not None:
        args += ["--ca-bundle", str(ca_bundle)]
    image = Image(REPOSITORY, version)
    started = time.monotonic()
    with noting_replaced_images(replaced_images, image.name):
        result = run_script("build.sh", *args, env=script_env(bin_dir))
    assert result.returncode == 0, tail(result.stdout + result.stderr, 60)
    print(f"build.sh: {time.monotonic() - started:.0f}s, {image_info(image.name)['Size']} bytes")
    return image


@pytest.fixture(scope="session")
def image_under_test(
    built_image: Image, ca_bundle: Path | None, replaced_images: list[str]
) -> Image:
    """The built image plus the stand-in model server's TensorFlow (see the docstring above)."""
    image = Image(UNDER_TEST_REPOSITORY, built_image.version)
    with noting_replaced_images(replaced_images, image.name):
        build_model_server_layer(built_image.name, image.name, built_image.version, ca_bundle)
    return image


@pytest.fixture(scope="session")
def models_dir(tmp_path_factory: pytest.TempPathFactory, test_models, testdata_dir: Path) -> Path:
    """A model directory as SageMaker lays it out: the bundled half_plus_three, TF Serving's
    half_plus_two (versions 123 and 124, classify/regress signatures) and MobileNetV2."""
    root = tmp_path_factory.mktemp("models")
    shutil.copytree(REPO_ROOT / "test/resources/models/half_plus_three", root / "half_plus_three")
    shutil.copytree(testdata_dir / "saved_model_half_plus_two_2_versions", root / "half_plus_two")
    shutil.copytree(test_models("mobilenet_v2"), root / "mobilenet_v2")
    return root
