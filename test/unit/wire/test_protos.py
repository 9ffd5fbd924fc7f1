"""sagemaker_tfs.wire.protos: built from the committed descriptor set, without TensorFlow."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.slow  # builds the descriptor set with TensorFlow's protos
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
