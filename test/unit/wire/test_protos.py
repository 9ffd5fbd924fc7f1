"""sagemaker_tfs.wire.protos: built from the committed descriptor set, without TensorFlow."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SERVICE_MODULES = [
    "sagemaker_tfs.wire.protos",
    "sagemaker_tfs.wire.tensors",
    "sagemaker_tfs.service.payloads",
    "sagemaker_tfs.client",
    "sagemaker_tfs.service.fast_path",
]


def test_service_modules_do_not_import_tensorflow() -> None:
    code = (
        "import importlib, json, sys\n"
        f"for name in {SERVICE_MODULES!r}:\n"
        "    importlib.import_module(name)\n"
        "try:\n"
        "    importlib.import_module('sagemaker_tfs.service.app')\n"
        "except ImportError:\n"
        "    pass\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('tensorflow', 'tensorflow_serving', 'keras'))))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []


def test_descriptor_file_is_up_to_date_with_installed_packages() -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts/make_protos.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]


def test_messages_are_wire_compatible_with_tensorflow_serving_apis() -> None:
    from sagemaker_tfs.wire import protos
    from tensorflow_serving.apis import predict_pb2

    ours = protos.PredictRequest()
    ours.model_spec.name = "m"
    ours.model_spec.version.value = 3
    ours.inputs["x"].dtype = 1
    ours.inputs["x"].float_val.extend([1.5, 2.5])
    theirs = predict_pb2.PredictRequest.FromString(ours.SerializeToString())
    assert theirs.model_spec.version.value == 3
    assert list(theirs.inputs["x"].float_val) == [1.5, 2.5]
    assert type(theirs) is not type(ours)  # separate pools: no clash with users' imports


def test_stubs_expose_every_service_method() -> None:
    import grpc
    from sagemaker_tfs.wire import protos

    channel = grpc.insecure_channel("localhost:1")
    try:
        prediction = protos.PredictionServiceStub(channel)
        model = protos.ModelServiceStub(channel)
        for method in ("Predict", "Classify", "Regress", "MultiInference", "GetModelMetadata"):
            assert callable(getattr(prediction, method))
        assert callable(model.GetModelStatus)
        assert callable(model.HandleReloadConfigRequest)
        with pytest.raises(AttributeError):
            prediction.Nope  # noqa: B018
    finally:
        channel.close()
