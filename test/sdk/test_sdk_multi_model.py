"""``Predictor.predict(..., target_model=...)`` against a multi-model stack: the SDK sends
``X-Amzn-SageMaker-Target-Model``; the model is loaded first through ``POST /models`` as
SageMaker's multi-model platform does."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from sagemaker.deserializers import JSONDeserializer
from sagemaker.local import LocalSession
from sagemaker.predictor import Predictor
from sagemaker.serializers import JSONSerializer
from whole_stack import RunningStack, running_stack


@pytest.fixture(scope="module")
def multi_model_stack(
    model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningStack]:
    models = tmp_path_factory.mktemp("sdk_mme_models")
    for name in ("half_plus_three", "half_plus_two"):  # copies: loads refuse links out
        shutil.copytree(model_dir / name, models / name)
    work_dir = tmp_path_factory.mktemp("sdk_mme_work")
    with running_stack(models, work_dir, multi_model=True) as running:
        for name, directory in (("hp3", "half_plus_three"), ("hp2", "half_plus_two")):
            loaded = requests.post(
                running.url + "/models",
                json={"model_name": name, "url": directory},  # under the models directory
                timeout=180,
            )
            assert loaded.status_code == 200, loaded.text
        yield running


def test_target_model(multi_model_stack: RunningStack) -> None:
    session = LocalSession()
    session.config = {"local": {"serving_port": multi_model_stack.port}}
    endpoint = Predictor("local-endpoint", session, JSONSerializer(), JSONDeserializer())
    assert endpoint.predict([1.0], target_model="hp3") == {"predictions": [[4.5]]}
    assert endpoint.predict([1.0], target_model="hp2") == {"predictions": [[2.5]]}
    missing = endpoint.predict([1.0], target_model="never_loaded")
    assert "never_loaded" in missing["error"]
    assert "error" in endpoint.predict([1.0])  # no target model on a multi-model endpoint
