"""Fixtures shared by every test: the generated test models (TF Serving's among them)."""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
RESOURCES_DIR = REPO_ROOT / "test" / "resources"
MODEL_GENERATOR = REPO_ROOT / "test" / "models" / "make_test_models.py"
SAGEMAKER_SDK = "sagemaker==2.257.7"  # v2: Predictor, serializers, local mode
PODMAN_COMPOSE = "podman-compose==1.6.0"  # the SDK's local mode runs docker-compose
SAGEMAKER_SDK_V3 = "sagemaker==3.27.0"  # v3: sagemaker.core's local mode, ModelBuilder
# TF Serving's own test models, made by test/models/tfs_models.py (the testdata_dir fixture).
TFS_TEST_MODELS = (
    "saved_model_half_plus_three",
    "saved_model_half_plus_two_2_versions",
    "saved_model_half_plus_two_cpu",
    "saved_model_half_plus_two_tf2_cpu",
    "saved_model_counter",
)


# Every test under these directories starts real processes or TensorFlow (whole stacks, model
# servers, containers, the SDK): they are the ``slow`` tier, the rest is the fast one
# (``pytest -m "not slow" test``, under two minutes).
SLOW_DIRS = ("integration/stack", "integration/model_server", "reliability", "image", "sdk")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    test_dir = REPO_ROOT / "test"
    for item in items:
        path = Path(str(item.fspath)).resolve()
        if any(path.is_relative_to(test_dir / directory) for directory in SLOW_DIRS):
            item.add_marker(pytest.mark.slow)


class TestModels:
    """Paths of the generated test models; builds a model the first time it is asked for."""

    __test__ = False  # not a test class, despite the name

    def __init__(self, root: Path) -> None:
        self.root = root

    def __call__(self, name: str) -> Path:
        """Base path of model ``name`` (the directory holding its version directories)."""
        self.ensure([name])
        return self.root / name

    def ensure(self, names: Iterable[str]) -> None:
        _load_generator().ensure_models(list(names), self.root)


@functools.cache
def _load_generator():  # type: ignore[no-untyped-def]
    """Import the generator lazily: it imports TensorFlow, which unit tests should not pay for."""
    spec = importlib.util.spec_from_file_location("make_test_models", MODEL_GENERATOR)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def model_generator():  # type: ignore[no-untyped-def]
    """The test model generator module (``test/models/make_test_models.py``)."""
    return _load_generator()


@pytest.fixture(scope="session")
def test_models() -> TestModels:
    """The project's generated test models (cached); ``test_models("half_plus_three")``."""
    root = Path(os.environ.get("SAGEMAKER_TFS_TEST_MODELS") or REPO_ROOT / "test" / ".models-cache")
    return TestModels(root)


@pytest.fixture(scope="session")
def testdata_dir(test_models: TestModels) -> Path:
    """The directory holding TF Serving's own test models (``TFS_TEST_MODELS``), as the project
    makes them (``test/models/tfs_models.py``) in the generated models' cache.

    ``SAGEMAKER_TFS_TESTDATA`` runs the same tests on another copy of them (TF Serving's own
    files, say); a model missing there fails the tests that need it."""
    copy = os.environ.get("SAGEMAKER_TFS_TESTDATA")
    if copy:
        missing = [name for name in TFS_TEST_MODELS if not (Path(copy) / name).is_dir()]
        if missing:
            pytest.fail(f"SAGEMAKER_TFS_TESTDATA={copy} lacks {', '.join(missing)}")
        return Path(copy)
    test_models.ensure(TFS_TEST_MODELS)
    return test_models.root


@pytest.fixture(scope="session")
def resources_dir() -> Path:
    """Files committed under ``test/resources`` (the bundled example model among them)."""
    return RESOURCES_DIR


@pytest.fixture(scope="session")
def sdk_python() -> Path:
    """Python of a virtualenv with the SageMaker Python SDK and podman-compose (for its local
    mode on podman), kept between runs in the
    container suite's cache (``SAGEMAKER_TFS_IMAGE_CACHE``, see test/image/base_images.py).
    Its own: the SDK pins protobuf (<7) and packaging (<25) below what the project uses."""
    default = Path(os.environ.get("HOME", "/root")) / ".cache" / "sagemaker-tfs-image"
    venv = Path(os.environ.get("SAGEMAKER_TFS_IMAGE_CACHE", default))
    versions = [requirement.split("==")[1] for requirement in (SAGEMAKER_SDK, PODMAN_COMPOSE)]
    venv = venv / ("sdk-venv-" + "-compose-".join(versions))
    python = venv / "bin" / "python"
    if not (venv / "installed").exists():
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", SAGEMAKER_SDK, PODMAN_COMPOSE],
            check=True,
            timeout=900,
        )
        (venv / "installed").touch()
    return python


@pytest.fixture(scope="session")
def sdk_v3_python() -> Path:
    """Python of a virtualenv with the SageMaker Python SDK v3, kept between runs in
    ``SAGEMAKER_TFS_SDK_CACHE`` (default ``~/.cache/sagemaker-tfs-sdk``). v2 and v3 are both the
    ``sagemaker`` package, so v3 cannot share the v2 virtualenv."""
    default = Path(os.environ.get("HOME", "/root")) / ".cache" / "sagemaker-tfs-sdk"
    cache = Path(os.environ.get("SAGEMAKER_TFS_SDK_CACHE", default))
    venv = cache / ("sdk-v3-venv-" + SAGEMAKER_SDK_V3.split("==")[1])
    python = venv / "bin" / "python"
    if not (venv / "installed").exists():
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", SAGEMAKER_SDK_V3],
            check=True,
            timeout=900,
        )
        (venv / "installed").touch()
    return python
