"""gRPC PredictionService/ModelService against a real model server process.

One server (module scope) serves TF Serving's own test models: the TF1 half_plus_three,
the TF2 half_plus_two, the TF1 half_plus_two and half_plus_two_2_versions (both versions,
with labels).
"""

from __future__ import annotations

from pathlib import Path

import grpc
import numpy as np
import pytest
import tfs_metadata
from google.protobuf import json_format
from grpc_helpers import float_tensor, model_stub, output_array, predict_request, prediction_stub
from model_server_process import ServerHandle, launch_model_server, wait_until_ready
from tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    inference_pb2,
    predict_pb2,
    regression_pb2,
)

MODELS = {
    "half_plus_three": ("saved_model_half_plus_three", ""),
    "half_plus_two_tf2": ("saved_model_half_plus_two_tf2_cpu", ""),
    "half_plus_two": ("saved_model_half_plus_two_cpu", ""),
    "two_versions": (
        "saved_model_half_plus_two_2_versions",
        "model_version_policy { all {} } "
        "version_labels { key: 'stable' value: 123 } version_labels { key: 'canary' value: 124 }",
    ),
}


def _config_text(root: Path) -> str:
    entries = [
        f"config {{ name: '{name}' base_path: '{root / directory}' "
        f"model_platform: 'tensorflow' {extra} }}"
        for name, (directory, extra) in MODELS.items()
    ]
    return "model_config_list {\n" + "\n".join(entries) + "\n}\n"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, testdata_dir: Path) -> ServerHandle:
    work = tmp_path_factory.mktemp("grpc")
    config = work / "models.config"
    config.write_text(_config_text(testdata_dir))
    handle = launch_model_server(
        (f"--model_config_file={config}", "--max_num_load_retries=0", "--rest_api_port=0"),
        work / "server.log",
    )
    wait_until_ready(handle)
    yield handle
    handle.stop()


@pytest.fixture(scope="module")
def stub(server: ServerHandle):
    return prediction_stub(server.grpc_target)


def _rpc_error(call, request) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        call(request)
    return caught.value


def test_predict_tf1_half_plus_three(stub) -> None:
    request = predict_request("half_plus_three", {"x": float_tensor([1.0, 2.0, 5.0])})
    response = stub.Predict(request)
    np.testing.assert_array_equal(output_array(response.outputs["y"]), [3.5, 4.0, 5.5])
    # TF Serving answers with typed *_val fields (Tensor::AsProtoField), not tensor_content.
    assert list(response.outputs["y"].float_val) == [3.5, 4.0, 5.5]
    assert not response.outputs["y"].tensor_content
    assert response.model_spec.name == "half_plus_three"
    assert response.model_spec.version.value == 123
    assert response.model_spec.signature_name == "serving_default"


def test_predict_tf2_half_plus_two_with_tensor_content(stub) -> None:
    import tensorflow as tf

    array = np.arange(6, dtype=np.float32).reshape(6, 1)
    request = predict_request("half_plus_two_tf2", {"x": tf.make_tensor_proto(array)})
    response = stub.Predict(request)
    np.testing.assert_array_equal(output_array(response.outputs["y"]), array * 0.5 + 2)


def test_streamed_predict_takes_and_sends_a_header_then_the_raw_values(
    server: ServerHandle,
) -> None:
    from sagemaker_tfs import client
    from sagemaker_tfs.wire import streamed_predict

    array = np.arange(600_000, dtype=np.float32).reshape(-1, 1)  # 2.4 MB: three pieces
    request = predict_request("half_plus_two_tf2", {"x": float_tensor(array)})
    channel = grpc.insecure_channel(server.grpc_target, options=client.CHANNEL_OPTIONS)
    method = channel.stream_stream(streamed_predict.STREAMED_PREDICT)
    header, *pieces = list(
        method(streamed_predict.request_messages(request.model_spec, {"x": array}))
    )
    assert [len(piece) for piece in pieces] == [streamed_predict.STREAM_PIECE_BYTES] * 2 + [
        array.nbytes - 2 * streamed_predict.STREAM_PIECE_BYTES
    ]
    described = predict_pb2.PredictResponse.FromString(header)
    assert described.model_spec.name == "half_plus_two_tf2"
    assert [d.size for d in described.outputs["y"].tensor_shape.dim] == [600_000, 1]
    assert not described.outputs["y"].float_val and not described.outputs["y"].tensor_content
    outputs = streamed_predict.StreamedTensors.receive_answer([header, *pieces]).complete()
    np.testing.assert_array_equal(outputs["y"], array * 0.5 + 2)

    missing = predict_request("no_such_model", {"x": float_tensor([1.0])})
    with pytest.raises(grpc.RpcError) as error:
        list(method(streamed_predict.request_messages(missing.model_spec, {"x": array})))
    assert error.value.code() == grpc.StatusCode.NOT_FOUND
    cut_short = list(streamed_predict.request_messages(request.model_spec, {"x": array}))[:-1]
    with pytest.raises(grpc.RpcError) as error:
        list(method(iter(cut_short)))
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "ended after 2097152 of the 2400000 bytes" in error.value.details()
    huge = predict_pb2.PredictRequest(model_spec=request.model_spec)
    huge.inputs["x"].dtype = 1
    huge.inputs["x"].tensor_shape.dim.add(size=1 << 40)  # 4 TiB announced: refused at once
    with pytest.raises(grpc.RpcError) as error:
        list(method(iter([huge.SerializeToString()])))
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "more than 2147483647" in error.value.details()  # TF Serving's INT32_MAX
    channel.close()


def test_streamed_predict_widens_the_pixels_its_metadata_names(server: ServerHandle) -> None:
    """uint8 values and a cast in the metadata: the model gets the widened floats. Without the
    cast a uint8 tensor for a float input is refused, as Predict refuses it; an unreadable
    cast, or one whose floats would exceed the request bound, is INVALID_ARGUMENT."""
    from sagemaker_tfs import client
    from sagemaker_tfs.wire import pixels, streamed_predict

    values = (np.arange(3000) % 256).astype(np.uint8).reshape(-1, 1)
    spec = predict_request("half_plus_two_tf2", {}).model_spec
    channel = grpc.insecure_channel(server.grpc_target, options=client.CHANNEL_OPTIONS)
    method = channel.stream_stream(streamed_predict.STREAMED_PREDICT)

    def call(metadata: tuple) -> dict[str, np.ndarray]:
        messages = streamed_predict.request_messages(spec, {"x": values})
        answer = method(messages, metadata=metadata or None)
        return streamed_predict.StreamedTensors.receive_answer(answer).complete()

    cast = pixels.PixelCast("float32", scale=0.5, offset=-3)
    outputs = call(pixels.to_metadata({"x": cast}))
    np.testing.assert_array_equal(outputs["y"], (values * 0.5 - 3).astype(np.float32) * 0.5 + 2)
    with pytest.raises(grpc.RpcError) as error:
        call(())
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "float" in error.value.details() and "uint8" in error.value.details()
    with pytest.raises(grpc.RpcError) as error:
        call(((pixels.METADATA_KEY, '{"x": ["int32", 1, 0]}'),))
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "float type, not 'int32'" in error.value.details()
    header = predict_pb2.PredictRequest(model_spec=spec)
    header.inputs["x"].dtype = 4  # DT_UINT8: 600 MB announced, 2.4 GB once widened
    header.inputs["x"].tensor_shape.dim.add(size=600_000_000)
    with pytest.raises(grpc.RpcError) as error:
        list(method(iter([header.SerializeToString()]), metadata=pixels.to_metadata({"x": cast})))
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "widened pixels take 2400000000 bytes, more than 2147483647" in error.value.details()
    channel.close()


def test_large_tensor_round_trip(stub) -> None:
    import tensorflow as tf

    array = np.random.default_rng(0).random((30_000_000, 1), dtype=np.float32)  # 120 MB
    request = predict_request("half_plus_two_tf2", {"x": tf.make_tensor_proto(array)})
    response = stub.Predict(request)
    result = np.asarray(response.outputs["y"].float_val, dtype=np.float32)
    np.testing.assert_allclose(result, array.reshape(-1) * 0.5 + 2)


def test_versions_and_labels(stub) -> None:
    inputs = {"x": float_tensor([[1.0]])}
    latest = stub.Predict(predict_request("two_versions", inputs))
    assert latest.model_spec.version.value == 124
    specific = stub.Predict(predict_request("two_versions", inputs, version=123))
    assert specific.model_spec.version.value == 123
    labelled = stub.Predict(predict_request("two_versions", inputs, label="stable"))
    assert labelled.model_spec.version.value == 123
    canary = stub.Predict(predict_request("two_versions", inputs, label="canary"))
    assert canary.model_spec.version.value == 124


def test_not_found_errors(stub) -> None:
    inputs = {"x": float_tensor([1.0])}
    error = _rpc_error(stub.Predict, predict_request("missing", inputs))
    assert error.code() == grpc.StatusCode.NOT_FOUND
    assert error.details() == "Servable not found for request: Latest(missing)"
    error = _rpc_error(stub.Predict, predict_request("half_plus_three", inputs, version=3))
    assert error.code() == grpc.StatusCode.NOT_FOUND
    assert error.details() == "Servable not found for request: Specific(half_plus_three, 3)"
    error = _rpc_error(stub.Predict, predict_request("two_versions", inputs, label="nope"))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details() == "Unrecognized servable version label: nope"


def test_invalid_requests_and_server_keeps_serving(stub) -> None:
    error = _rpc_error(
        stub.Predict, predict_request("half_plus_three", {"x": float_tensor([1.0])}, "foo")
    )
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details() == 'Serving signature name: "foo" not found in signature def'
    error = _rpc_error(stub.Predict, predict_request("half_plus_three", {"z": float_tensor([1])}))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details().startswith("input size does not match signature: 1!=1")
    assert "Sent extra: {z}. Missing but required: {x}." in error.details()
    import tensorflow as tf

    strings = tf.make_tensor_proto(np.array([b"a"], dtype=object))
    error = _rpc_error(stub.Predict, predict_request("half_plus_three", {"x": strings}))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details() == "Expects arg[0] to be float but string is provided"
    response = stub.Predict(predict_request("half_plus_three", {"x": float_tensor([1.0])}))
    np.testing.assert_array_equal(output_array(response.outputs["y"]), [3.5])


def test_unparsable_and_inconsistent_predict_requests(server: ServerHandle, stub) -> None:
    """Predict reads its request in place (predict_messages): bad bytes still get a status."""
    channel = grpc.insecure_channel(server.grpc_target)
    raw_predict = channel.unary_unary("/tensorflow.serving.PredictionService/Predict")
    error = _rpc_error(raw_predict, b"\x0a\xff\xff")
    assert error.code() == grpc.StatusCode.INTERNAL
    assert error.details() == "Failed to parse PredictRequest"
    short = float_tensor([1.0, 2.0])
    short.ClearField("float_val")
    short.tensor_content = b"\x00" * 7
    error = _rpc_error(stub.Predict, predict_request("half_plus_three", {"x": short}))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "7 bytes" in error.details()
    response = stub.Predict(predict_request("half_plus_three", {"x": float_tensor([1.0])}))
    np.testing.assert_array_equal(output_array(response.outputs["y"]), [3.5])
    channel.close()


def test_output_filter(stub) -> None:
    request = predict_request("half_plus_three", {"x": float_tensor([1.0])})
    request.output_filter.append("nope")
    error = _rpc_error(stub.Predict, request)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details().startswith("output tensor alias not found in signature: nope")


def _examples_input(request, context: dict | None, examples: list[dict]) -> None:
    if context is None:
        target = request.input.example_list.examples
    else:
        with_context = request.input.example_list_with_context
        for key, value in context.items():
            with_context.context.features.feature[key].float_list.value.append(value)
        target = with_context.examples
    for example in examples:
        proto = target.add()
        for key, value in example.items():
            proto.features.feature[key].float_list.value.append(value)


def test_regress_and_classify(stub) -> None:
    request = regression_pb2.RegressionRequest()
    request.model_spec.name = "two_versions"
    request.model_spec.signature_name = "regress_x_to_y"
    _examples_input(request, None, [{"x": 1.0}, {"x": 4.0}])
    response = stub.Regress(request)
    assert [r.value for r in response.result.regressions] == [2.5, 4.0]
    assert response.model_spec.signature_name == "regress_x_to_y"

    request = classification_pb2.ClassificationRequest()
    request.model_spec.name = "two_versions"
    request.model_spec.signature_name = "classify_x_to_y"
    _examples_input(request, {"x": 10.0}, [{"x2": 1.0}, {"x": 2.0}])
    response = stub.Classify(request)
    scores = [[c.score for c in item.classes] for item in response.result.classifications]
    assert scores == [[7.0], [3.0]]  # the first example takes x from the context

    request = regression_pb2.RegressionRequest()
    request.model_spec.name = "half_plus_three"
    request.model_spec.signature_name = "tensorflow/serving/regress"
    _examples_input(request, None, [{"x": 1.0}])
    assert [r.value for r in stub.Regress(request).result.regressions] == [3.5]


def test_classify_on_regress_signature_is_refused_by_its_outputs(stub) -> None:
    """Method names are not checked (TF Serving's default); the outputs are."""
    request = classification_pb2.ClassificationRequest()
    request.model_spec.name = "two_versions"
    request.model_spec.signature_name = "regress_x_to_y"
    _examples_input(request, None, [{"x": 1.0}])
    error = _rpc_error(stub.Classify, request)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details() == (
        "Expected classification signature outputs to contain at least one of: classes, scores"
    )
    request.model_spec.signature_name = "serving_default"  # input x, not inputs
    error = _rpc_error(stub.Classify, request)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details().startswith("No classification inputs found in SignatureDef: ")


def test_classify_and_regress_on_tf2_signatures(stub) -> None:
    """A TF2 SavedModel marks every signature tensorflow/serving/predict; TF Serving checks
    method names only with --enable_signature_method_name_check, so these answer: y(2) = 3."""
    regress = regression_pb2.RegressionRequest()
    regress.model_spec.name = "half_plus_two_tf2"
    regress.model_spec.signature_name = "regress_x_to_y"
    _examples_input(regress, None, [{"x": 2.0}])
    assert [r.value for r in stub.Regress(regress).result.regressions] == [3.0]

    classify = classification_pb2.ClassificationRequest()
    classify.model_spec.name = "half_plus_two_tf2"
    classify.model_spec.signature_name = "classify_x_to_y"
    _examples_input(classify, None, [{"x": 2.0}])
    [result] = stub.Classify(classify).result.classifications
    assert [c.score for c in result.classes] == [3.0]


@pytest.mark.parametrize("model", ["two_versions", "half_plus_two_tf2"])
def test_multi_inference(stub, model: str) -> None:
    """TF1 signatures of the classify/regress methods, and TF2 ones all marked predict."""
    request = inference_pb2.MultiInferenceRequest()
    for signature, method in (
        ("regress_x_to_y", "tensorflow/serving/regress"),
        ("classify_x_to_y", "tensorflow/serving/classify"),
    ):
        task = request.tasks.add()
        task.model_spec.name = model
        task.model_spec.signature_name = signature
        task.method_name = method
    example = request.input.example_list.examples.add()
    example.features.feature["x"].float_list.value.append(2.0)
    response = stub.MultiInference(request)
    assert response.results[0].regression_result.regressions[0].value == 3.0
    assert response.results[1].classification_result.classifications[0].classes[0].score == 3.0
    request.tasks[0].method_name = "tensorflow/serving/predict"  # a task names its method
    error = _rpc_error(stub.MultiInference, request)
    assert error.code() == grpc.StatusCode.UNIMPLEMENTED
    assert error.details() == "Unsupported signature method_name: tensorflow/serving/predict"


@pytest.mark.parametrize("model", ["half_plus_two", "two_versions"])
def test_metadata_matches_tf_serving(stub, testdata_dir: Path, model: str) -> None:
    request = get_model_metadata_pb2.GetModelMetadataRequest()
    request.model_spec.name = model
    request.model_spec.version.value = 123
    request.metadata_field.append("signature_def")
    response = stub.GetModelMetadata(request)
    signature_map = get_model_metadata_pb2.SignatureDefMap()
    response.metadata["signature_def"].Unpack(signature_map)
    ours = json_format.MessageToDict(
        signature_map,
        preserving_proto_field_name=True,
        always_print_fields_with_no_presence=True,
    )
    version_dir = testdata_dir / MODELS[model][0] / "00000123"
    assert ours == tfs_metadata.signature_def_map(version_dir)
    assert response.model_spec.name == model
    assert response.model_spec.version.value == 123


def test_metadata_requires_signature_def_field(stub) -> None:
    request = get_model_metadata_pb2.GetModelMetadataRequest()
    request.model_spec.name = "half_plus_three"
    request.metadata_field.append("other")
    error = _rpc_error(stub.GetModelMetadata, request)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details() == "Metadata field other is not supported"


def test_model_status(server: ServerHandle) -> None:
    models = model_stub(server.grpc_target)
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = "two_versions"
    response = models.GetModelStatus(request)
    assert [s.version for s in response.model_version_status] == [124, 123]
    assert {s.state for s in response.model_version_status} == {
        get_model_status_pb2.ModelVersionStatus.AVAILABLE
    }
    request.model_spec.name = "missing"
    error = _rpc_error(models.GetModelStatus, request)
    assert error.code() == grpc.StatusCode.NOT_FOUND
    assert error.details() == "Could not find any versions of model missing"
    request.model_spec.name = "half_plus_three"
    request.model_spec.version.value = 3
    error = _rpc_error(models.GetModelStatus, request)
    assert error.details() == "Could not find version 3 of model half_plus_three"
