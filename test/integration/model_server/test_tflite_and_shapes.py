"""``--prefer_tflite_model`` answers as the SavedModel does; shapes go to the graph unchecked,
except into kernels that would abort the process on the wrong rank (``rank_guard``)."""

from __future__ import annotations

import shutil
from pathlib import Path

import grpc
import numpy as np
import pytest
import requests
from flag_cases import (
    CONVERTED_INPUT,
    CONVERTED_OUTPUT,
    TF2_MODEL,
    grpc_predict,
    rpc_error,
    tflite_predict,
)
from grpc_helpers import prediction_stub
from rest_helpers import model_config
from tensorflow_serving.apis import get_model_metadata_pb2

pytestmark = pytest.mark.slow
INPUTS = [[1.0], [1.0, 2.0, 5.0], [[1.0, 2.0], [3.0, 4.0]], [-3.5] * 100]


def test_tflite_predict_answers_as_the_savedmodel_does(
    start_model_server, testdata_dir: Path, tmp_path: Path, model_generator
) -> None:
    """A model from today's converter is served with the signature TF Serving generates for
    it, keyed by tensor names (not its signature runner's ``x`` and ``y``): the inputs and
    outputs change names, the answers are the SavedModel's."""
    for name in ("saved", "lite"):
        shutil.copytree(testdata_dir / TF2_MODEL / "00000123", tmp_path / name / "1")
    model_generator.write_half_plus_two_tflite(tmp_path / "lite" / "1")
    config = tmp_path / "models.config"
    config.write_text(
        model_config([{"name": n, "base_path": tmp_path / n} for n in ("saved", "lite")])
    )
    server = start_model_server(f"--model_config_file={config}", "--prefer_tflite_model")
    for values in INPUTS:
        saved = grpc_predict(server.grpc_target, values, model="saved")
        assert tflite_predict(server.grpc_target, values, model="lite") == saved
        rest = [
            requests.post(
                f"{server.rest_url}/v1/models/{name}:predict",
                json={"inputs": {alias: values}},
                timeout=30,
            ).json()
            for name, alias in (("saved", "x"), ("lite", CONVERTED_INPUT))
        ]
        assert rest[0] == rest[1] == {"outputs": saved}
    request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
    request.model_spec.name = "lite"
    signatures = get_model_metadata_pb2.SignatureDefMap()
    answer = prediction_stub(server.grpc_target).GetModelMetadata(request, timeout=30)
    answer.metadata["signature_def"].Unpack(signatures)
    assert list(signatures.signature_def) == ["serving_default"]
    assert list(signatures.signature_def["serving_default"].inputs) == [CONVERTED_INPUT]
    assert list(signatures.signature_def["serving_default"].outputs) == [CONVERTED_OUTPUT]
    error = rpc_error(
        lambda: tflite_predict(server.grpc_target, [1], model="lite", signature="nope")
    )
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT


def _conv_model(export_dir: Path) -> None:
    """A TF2 module whose signature calls a function holding a Conv2D: input (-1, 4, 4, 1)."""
    import tensorflow as tf

    class Conv(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.kernel = tf.Variable(tf.ones([2, 2, 1, 1]))

        @tf.function(input_signature=[tf.TensorSpec([None, 4, 4, 1], tf.float32, name="images")])
        def serve(self, images: tf.Tensor) -> dict:
            return {"summed": tf.nn.conv2d(images, self.kernel, 1, "VALID")}

    module = Conv()
    tf.saved_model.save(module, str(export_dir), signatures={"serving_default": module.serve})


def test_a_convolution_fed_the_wrong_rank_is_a_400_not_a_crash(
    start_model_server, testdata_dir: Path, tmp_path: Path
) -> None:
    """TensorFlow's oneDNN convolution aborts the process on an input of the wrong rank; the
    model server refuses it instead. Other inputs still take any shape (half_plus_two's
    ``x`` is [-1] and takes a matrix)."""
    _conv_model(tmp_path / "conv" / "1")
    shutil.copytree(testdata_dir / TF2_MODEL / "00000123", tmp_path / "hp2" / "1")
    config = tmp_path / "models.config"
    config.write_text(
        model_config([{"name": n, "base_path": tmp_path / n} for n in ("conv", "hp2")])
    )
    server = start_model_server(f"--model_config_file={config}")
    url = f"{server.rest_url}/v1/models/conv:predict"
    good = requests.post(url, json={"inputs": np.ones((1, 4, 4, 1)).tolist()}, timeout=30)
    assert good.status_code == 200, good.text
    assert np.array(good.json()["outputs"]).shape == (1, 3, 3, 1)
    for wrong in (np.ones((1, 3)), np.ones((2, 4, 4, 1, 1))):
        refused = requests.post(url, json={"inputs": wrong.tolist()}, timeout=30)
        assert refused.status_code == 400, refused.text
        assert "needs a 4-dimensional input" in refused.json()["error"]
    assert server.process.poll() is None
    assert requests.post(url, json={"inputs": np.ones((2, 4, 4, 1)).tolist()}, timeout=30).ok
    matrix = requests.post(
        f"{server.rest_url}/v1/models/hp2:predict", json={"inputs": [[1, 2], [3, 4]]}, timeout=30
    )
    assert matrix.json() == {"outputs": [[2.5, 3.0], [3.5, 4.0]]}
