"""The SageMaker Python SDK v2 as the client of the host stack (real nginx, gunicorn, model
server; ``test/integration/stack/whole_stack.py``), run by ``tox -e sdk``.

Nothing is mocked: the SDK's ``Predictor`` / ``TensorFlowPredictor`` and its serializers call
the stack over HTTP through the SDK's local-mode runtime client (what ``instance_type="local"``
endpoints use; the boto3 ``sagemaker-runtime`` client would need AWS). No AWS is reached
(``test/sdk_offline.py``): the only stand-in is the ``docker`` the SDK asks for the engine's
address.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("sagemaker", reason="the SDK suite runs in tox -e sdk")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration" / "stack"))

from sdk_offline import offline_sdk_env, sdk_bin_dir  # noqa: E402
from whole_stack import RunningStack, running_stack  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session", autouse=True)
def offline_sdk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    bin_dir = sdk_bin_dir(tmp_path_factory.mktemp("sdk_bin"))
    with pytest.MonkeyPatch.context() as patch:
        for name, value in offline_sdk_env(tmp_path_factory.mktemp("sdk_config"), bin_dir).items():
            patch.setenv(name, value)
        yield


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory, test_models, testdata_dir: Path) -> Path:
    """half_plus_three (generated, versions 123: 0.5x+3 and 124: 0.5x+4), TF Serving's
    half_plus_two (versions 123 and 124, classify/regress signatures) and half_plus_three
    (no recorded input shape), and a classifier that decodes JPEG bytes itself."""
    root = tmp_path_factory.mktemp("sdk_models")
    links = {
        "half_plus_three": test_models("half_plus_three"),
        "half_plus_two": testdata_dir / "saved_model_half_plus_two_2_versions",
        "tfs_half_plus_three": testdata_dir / "saved_model_half_plus_three",
        "jpeg_classifier": test_models("jpeg_classifier"),
    }
    for name, target in links.items():
        (root / name).symlink_to(target, target_is_directory=True)
    return root


@pytest.fixture(scope="session")
def stack(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    env = {"SAGEMAKER_TFS_DEFAULT_MODEL_NAME": "half_plus_three"}
    with running_stack(model_dir, tmp_path_factory.mktemp("sdk_work"), env) as running:
        yield running


@pytest.fixture(scope="session")
def session(stack: RunningStack, offline_sdk):  # type: ignore[no-untyped-def]
    """A LocalSession whose runtime client calls the stack's port."""
    from sagemaker.local import LocalSession

    local = LocalSession()
    local.config = {"local": {"serving_port": stack.port}}
    return local
