"""``--prefer_tflite_model=true`` loads and answers as TF Serving's TFLite session does: the
SignatureDefs of the model's ``signature_defs_metadata`` entry, else a generated
``serving_default`` keyed by the TFLite tensor names; SignatureDefs that do not parse, or that
name a tensor the model lacks, fail the load with TF Serving's texts.

One model server serves the model maker's four TFLite models, a model made by today's TF
converter (native signature runners, no metadata entry), and the SavedModels of the same
functions; every answer of a TFLite model is compared with its SavedModel's, over gRPC and
REST.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator

import grpc
import numpy as np
import pytest
import requests
from flag_cases import CONVERTED_INPUT, CONVERTED_OUTPUT, rpc_error
from grpc_helpers import float_tensor, model_stub, output_array, predict_request, prediction_stub
from model_server_process import ServerHandle, start_server, stop_server
from rest_helpers import model_config
from tensorflow.core.protobuf import meta_graph_pb2
from tensorflow_serving.apis import get_model_metadata_pb2, get_model_status_pb2

pytestmark = pytest.mark.slow
State = get_model_status_pb2.ModelVersionStatus.State
INVALID_SIGNATURE_DEFS = (
    "Invalid SignatureDefs found in TfLite model: Cannot parse signature def found in flatbuffer."
)
UNKNOWN_TENSOR = "Signature input x references an unknown tensor"
GENERATING = "No signature def found in TFLite model. Generating one."
VALUES = [[1.0], [1.0, 2.0, 5.0], [-3.5] * 100]
# Served under these names; the TFLite ones are the model maker's (or the converter's).
TFLITE = {
    "lite": "half_plus_two_tflite",
    "lite_sigdef": "half_plus_two_tflite_with_sigdef",
    "lite_bad": "half_plus_two_tflite_bad_sigdef",
    "lite_unknown": "half_plus_two_tflite_unknown_tensor",
}
INTERPRETERS_PER_POOL = 3


@pytest.fixture(scope="module")
def server(tmp_path_factory, test_models, model_generator) -> Iterator[ServerHandle]:
    """Every model above in one model server; ``saved`` is the SavedModel beside the
    maker's ``model.tflite``s, ``converted``/``saved_tf2`` the TF2 half_plus_two as TFLite
    (converted by today's converter) and as a SavedModel."""
    work = tmp_path_factory.mktemp("tflite")
    bases = {name: test_models(model) for name, model in TFLITE.items()}
    bases["saved"] = work / "saved"
    shutil.copytree(
        bases["lite"] / "1", bases["saved"] / "1", ignore=shutil.ignore_patterns("model.tflite")
    )
    bases["saved_tf2"] = test_models("half_plus_two")
    bases["converted"] = work / "converted"
    shutil.copytree(bases["saved_tf2"] / "1", bases["converted"] / "1")
    model_generator.write_half_plus_two_tflite(bases["converted"] / "1")
    config = work / "models.config"
    config.write_text(model_config([{"name": n, "base_path": p} for n, p in bases.items()]))
    handle = start_server(
        [
            f"--model_config_file={config}",
            "--prefer_tflite_model=true",
            f"--num_tflite_interpreters_per_pool={INTERPRETERS_PER_POOL}",
            "--max_num_load_retries=0",
        ],
        work / "model_server.log",
    )
    yield handle
    stop_server(handle)


def grpc_outputs(
    server: ServerHandle, model: str, inputs: dict[str, list], signature: str = ""
) -> dict[str, list]:
    request = predict_request(
        model, {alias: float_tensor(values) for alias, values in inputs.items()}, signature
    )
    response = prediction_stub(server.grpc_target).Predict(request, timeout=30)
    return {alias: output_array(proto).tolist() for alias, proto in response.outputs.items()}


def grpc_signatures(server: ServerHandle, model: str) -> dict[str, meta_graph_pb2.SignatureDef]:
    request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
    request.model_spec.name = model
    answer = prediction_stub(server.grpc_target).GetModelMetadata(request, timeout=30)
    signatures = get_model_metadata_pb2.SignatureDefMap()
    answer.metadata["signature_def"].Unpack(signatures)
    return dict(signatures.signature_def)


def rest_predict(server: ServerHandle, model: str, body: dict) -> requests.Response:
    return requests.post(f"{server.rest_url}/v1/models/{model}:predict", json=body, timeout=30)


def rest_signatures(server: ServerHandle, model: str) -> dict:
    answer = requests.get(f"{server.rest_url}/v1/models/{model}/metadata", timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()["metadata"]["signature_def"]["signature_def"]


def with_tflite_names(signature: meta_graph_pb2.SignatureDef) -> meta_graph_pb2.SignatureDef:
    """A SavedModel's SignatureDef as TF Serving serves it from TFLite: ``x:0`` -> ``x``."""
    fixed = meta_graph_pb2.SignatureDef()
    fixed.CopyFrom(signature)
    for infos in (fixed.inputs, fixed.outputs):
        for alias in infos:
            infos[alias].name = infos[alias].name.removesuffix(":0")
    return fixed


def rest_with_tflite_names(signature: dict) -> dict:
    """The same for a SignatureDef as REST's metadata writes it."""
    fixed = json.loads(json.dumps(signature))
    for side in ("inputs", "outputs"):
        for info in fixed[side].values():
            info["name"] = info["name"].removesuffix(":0")
    return fixed


def version_status(server: ServerHandle, model: str) -> list[tuple[int, int, int, str]]:
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = model
    response = model_stub(server.grpc_target).GetModelStatus(request, timeout=30)
    return [
        (s.version, s.state, s.status.error_code, s.status.error_message)
        for s in response.model_version_status
    ]


def test_a_model_without_signature_defs_gets_a_generated_serving_default(
    server: ServerHandle,
) -> None:
    assert GENERATING in server.log
    saved = grpc_signatures(server, "saved")
    assert set(saved) == {"serving_default", "plus_two"}
    lite = grpc_signatures(server, "lite")
    assert lite == {"serving_default": with_tflite_names(saved["serving_default"])}
    assert lite["serving_default"].method_name == "tensorflow/serving/predict"
    saved_rest = rest_signatures(server, "saved")["serving_default"]
    assert rest_signatures(server, "lite") == {
        "serving_default": rest_with_tflite_names(saved_rest)
    }
    for values in VALUES:
        expected = grpc_outputs(server, "saved", {"x": values})
        assert expected == {"y": (0.5 * np.array(values, np.float32) + 2).tolist()}
        assert grpc_outputs(server, "lite", {"x": values}) == expected
        for body in ({"instances": values}, {"inputs": {"x": values}}):
            answer = rest_predict(server, "lite", body)
            assert answer.status_code == 200, answer.text
            assert answer.text == rest_predict(server, "saved", body).text


def test_signature_defs_from_the_metadata_are_served_with_their_tflite_names(
    server: ServerHandle,
) -> None:
    saved = grpc_signatures(server, "saved")
    lite = grpc_signatures(server, "lite_sigdef")
    assert lite == {key: with_tflite_names(signature) for key, signature in saved.items()}
    assert lite["plus_two"].inputs["value"].name == "x"  # stored as x:0, TFLite's name is x
    assert set(rest_signatures(server, "lite_sigdef")) == {"serving_default", "plus_two"}
    for values in VALUES:
        for signature, alias in (("serving_default", "x"), ("plus_two", "value")):
            expected = grpc_outputs(server, "saved", {alias: values}, signature)
            assert grpc_outputs(server, "lite_sigdef", {alias: values}, signature) == expected
            body = {"signature_name": signature, "inputs": {alias: values}}
            answer = rest_predict(server, "lite_sigdef", body)
            assert answer.status_code == 200, answer.text
            assert answer.text == rest_predict(server, "saved", body).text
    # The generated signature is not there: its tensor-name keys are refused as unknown.
    error = rpc_error(lambda: grpc_outputs(server, "lite_sigdef", {"x": [1.0]}, "plus_two"))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "Missing but required: {value}" in error.details()


@pytest.mark.parametrize(
    ("model", "code", "message"),
    [
        ("lite_bad", grpc.StatusCode.INVALID_ARGUMENT, INVALID_SIGNATURE_DEFS),
        ("lite_unknown", grpc.StatusCode.INTERNAL, UNKNOWN_TENSOR),
    ],
)
def test_bad_signature_defs_fail_the_load_with_tf_servings_text(
    server: ServerHandle, model: str, code: grpc.StatusCode, message: str
) -> None:
    [(version, state, error_code, error_message)] = version_status(server, model)
    assert (version, state, error_code) == (1, State.END, code.value[0])
    assert error_message.endswith(f"failed: {code.name}: {message}")
    status = requests.get(f"{server.rest_url}/v1/models/{model}", timeout=30)
    assert status.status_code == 200
    [rest_status] = status.json()["model_version_status"]
    assert rest_status["state"] == "END"
    assert rest_status["status"] == {"error_code": code.name, "error_message": error_message}
    assert message in server.log
    error = rpc_error(lambda: grpc_outputs(server, model, {"x": [1.0]}))
    assert error.code() == grpc.StatusCode.NOT_FOUND
    assert error.details() == f"Servable not found for request: Latest({model})"
    not_found = f'{{\n    "error": "Servable not found for request: Latest({model})"\n}}'
    answer = rest_predict(server, model, {"instances": [1.0]})
    assert (answer.status_code, answer.text) == (404, not_found)
    metadata = requests.get(f"{server.rest_url}/v1/models/{model}/metadata", timeout=30)
    assert (metadata.status_code, metadata.text) == (404, not_found)


def test_a_converter_made_model_answers_by_its_tensor_names(server: ServerHandle) -> None:
    """Today's converter records signature runners and no SignatureDefs: TF Serving ignores
    the runners (alias ``x``) and serves the generated signature, keyed by tensor names."""
    [(key, signature)] = grpc_signatures(server, "converted").items()
    assert key == "serving_default"
    assert list(signature.inputs) == [CONVERTED_INPUT]
    assert list(signature.outputs) == [CONVERTED_OUTPUT]
    assert signature.inputs[CONVERTED_INPUT].name == CONVERTED_INPUT
    for values in VALUES:
        expected = grpc_outputs(server, "saved_tf2", {"x": values})["y"]
        answer = grpc_outputs(server, "converted", {CONVERTED_INPUT: values})
        assert answer == {CONVERTED_OUTPUT: expected}
        rows = rest_predict(server, "converted", {"instances": values})
        assert rows.json() == {"predictions": expected}
        columns = rest_predict(server, "converted", {"inputs": {CONVERTED_INPUT: values}})
        assert columns.json() == {"outputs": expected}
    error = rpc_error(lambda: grpc_outputs(server, "converted", {"x": [1.0]}))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert f"Missing but required: {{{CONVERTED_INPUT}}}" in error.details()
    refused = rest_predict(server, "converted", {"instances": [{"x": 1.0}]})
    assert refused.status_code == 400
    assert refused.json() == {
        "error": "Failed to process element: 0 key: x of 'instances' list. Error: "
        "INVALID_ARGUMENT: JSON object: does not have named input: x"
    }


def test_a_large_batch_is_shared_by_the_pools_interpreters(server: ServerHandle) -> None:
    """``--num_tflite_interpreters_per_pool=3``: more than ceil(500 / 3) rows are cut into
    parts run on the pool's interpreters; the joined answer is the SavedModel's."""
    values = np.linspace(-50, 50, 1001, dtype=np.float32).tolist()
    expected = grpc_outputs(server, "saved", {"x": values})
    assert grpc_outputs(server, "lite", {"x": values}) == expected
    matrix = np.arange(2 * 400, dtype=np.float32).reshape(400, 2).tolist()
    assert grpc_outputs(server, "lite", {"x": matrix}) == grpc_outputs(
        server, "saved", {"x": matrix}
    )
