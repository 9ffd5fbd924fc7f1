"""REST API of a real ``sagemaker-tfs model-server`` process, compared byte for byte with
TF Serving's documented answers (its REST API guide) on TF Serving's own test models."""

from __future__ import annotations

import base64
import concurrent.futures
import json
import socket
from pathlib import Path
from typing import Any

import pytest
import tfs_metadata
from model_server_process import start_server, stop_server
from rest_helpers import RestClient, model_config

pytestmark = pytest.mark.slow

STATUS_123 = (
    "{\n"
    ' "model_version_status": [\n'
    "  {\n"
    '   "version": "123",\n'
    '   "state": "AVAILABLE",\n'
    '   "status": {\n'
    '    "error_code": "OK",\n'
    '    "error_message": ""\n'
    "   }\n"
    "  }\n"
    " ]\n"
    "}\n"
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, testdata_dir: Path, test_models: Any):
    """One server holding TF Serving's test models and the project's generated ones."""
    test_models.ensure(["half_plus_three", "half_plus_two", "multi_io"])
    models = [
        {"name": "half_plus_three", "base_path": testdata_dir / "saved_model_half_plus_three"},
        {
            "name": "half_plus_two_2_versions",
            "base_path": testdata_dir / "saved_model_half_plus_two_2_versions",
            "versions": [123, 124],
        },
        {"name": "tf2", "base_path": testdata_dir / "saved_model_half_plus_two_tf2_cpu"},
        {"name": "tf1_cpu", "base_path": testdata_dir / "saved_model_half_plus_two_cpu"},
        {
            "name": "hp3",
            "base_path": test_models("half_plus_three"),
            "versions": [123, 124],
            "labels": {"stable": 123, "canary": 124},
        },
        {"name": "gen_tf2", "base_path": test_models("half_plus_two")},
        {"name": "multi_io", "base_path": test_models("multi_io")},
    ]
    tmp = tmp_path_factory.mktemp("rest")
    config = tmp / "models.config"
    config.write_text(model_config(models))
    handle = start_server(
        [f"--model_config_file={config}", "--rest_api_num_threads=4"], tmp / "server.log"
    )
    yield handle
    stop_server(handle)


@pytest.fixture
def client(server: Any) -> RestClient:
    return RestClient(server.rest_url)


def error_of(response: Any) -> str:
    assert response.headers["Content-Type"] == "application/json"
    return json.loads(response.content)["error"]


def error_body(message: str) -> bytes:
    return ('{\n    "error": ' + json.dumps(message) + "\n}").encode()


# ----------------------------------------------------------------------------- predict bytes


def test_predict_row_is_byte_exact(client: RestClient) -> None:
    response = client.post("/v1/models/half_plus_three:predict", '{"instances": [1.0, 2.0, 5.0]}')
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    assert response.content == b'{\n    "predictions": [3.5, 4.0, 5.5\n    ]\n}'


def test_predict_columnar_is_byte_exact(client: RestClient) -> None:
    response = client.post("/v1/models/half_plus_three:predict", '{"inputs": [1.0, 2.0]}')
    assert response.status_code == 200
    assert response.content == b'{\n    "outputs": [\n        3.5,\n        4.0\n    ]\n}'


def test_predict_2d_rows_on_one_line(client: RestClient) -> None:
    response = client.post(
        "/v1/models/half_plus_two_2_versions:predict", '{"instances": [[1.0], [3.0]]}'
    )
    assert response.content == b'{\n    "predictions": [[2.5], [3.5]\n    ]\n}'


def test_predict_float_formatting_rule(client: RestClient) -> None:
    # 0.5 * 1e7 + 3 = 5000003 needs %.9g; 0.5 * 0.1 + 3 = 3.05 as float32 prints 3.05.
    response = client.post(
        "/v1/models/half_plus_three:predict", '{"instances": [1e7, 0.1, 2, -6.0]}'
    )
    assert response.content == b'{\n    "predictions": [5000003.0, 3.05, 4.0, 0.0\n    ]\n}'


def test_predict_nan_and_infinity(client: RestClient) -> None:
    response = client.post(
        "/v1/models/half_plus_three:predict", '{"instances": [NaN, Infinity, -Infinity]}'
    )
    assert response.status_code == 200
    assert response.content == b'{\n    "predictions": [NaN, Infinity, -Infinity\n    ]\n}'


def test_trailing_bytes_after_root_are_ignored(client: RestClient) -> None:
    response = client.post("/v1/models/half_plus_three:predict", '{"instances": [1.0]} ][ junk')
    assert response.status_code == 200
    assert response.content == b'{\n    "predictions": [3.5\n    ]\n}'


def test_signature_name_and_tf2_model(client: RestClient) -> None:
    for model in ("tf2", "gen_tf2"):
        response = client.post(
            f"/v1/models/{model}:predict",
            '{"signature_name": "serving_default", "instances": [1.0, 2.0]}',
        )
        assert response.status_code == 200, response.text
        assert json.loads(response.content) in (
            {"predictions": [2.5, 3.0]},
            {"predictions": [[2.5], [3.0]]},
        )


def test_versions_and_labels_in_url(client: RestClient) -> None:
    paths_and_values = {
        "/v1/models/hp3:predict": 4.5,  # latest = 124: 0.5x + 4
        "/v1/models/hp3/versions/123:predict": 3.5,
        "/v1/models/hp3/versions/124:predict": 4.5,
        "/v1/models/hp3/labels/stable:predict": 3.5,
        "/v1/models/hp3/labels/canary:predict": 4.5,
        "/V1/MODELS/hp3/VERSIONS/123:predict": 3.5,  # the route regex ignores case
    }
    for path, value in paths_and_values.items():
        response = client.post(path, '{"instances": [1.0]}')
        assert response.status_code == 200, (path, response.text)
        assert json.loads(response.content) == {"predictions": [value]}, path


def test_several_inputs_and_outputs_row_format(client: RestClient) -> None:
    instances = [
        {"a": [1.0, 2.0], "b": 3, "s": "hi"},
        {"a": [0.5, 0.25], "b": -1, "s": {"b64": base64.b64encode(b"\xffz").decode()}},
    ]
    response = client.post("/v1/models/multi_io:predict", json.dumps({"instances": instances}))
    assert response.status_code == 200, response.text
    hi, ff = (base64.b64encode(raw).decode() for raw in (b"hi!", b"\xffz!"))
    expected = (
        "{\n"
        '    "predictions": [{\n'
        '            "b_doubled": 6,\n'
        '            "length": 2,\n'
        '            "s_bytes": {\n'
        f'                "b64": "{hi}"\n'
        "            },\n"
        '            "sum": 6.0\n'
        "        }, {\n"
        '            "b_doubled": -2,\n'
        '            "length": 2,\n'
        '            "s_bytes": {\n'
        f'                "b64": "{ff}"\n'
        "            },\n"
        '            "sum": -0.25\n'
        "        }\n"
        "    ]\n"
        "}"
    )
    assert response.content.decode() == expected


def test_several_inputs_and_outputs_columnar(client: RestClient) -> None:
    inputs = {"a": [[1.0, 2.0]], "b": [3], "s": ["x"]}
    response = client.post("/v1/models/multi_io:predict", json.dumps({"inputs": inputs}))
    assert response.status_code == 200, response.text
    expected = (
        "{\n"
        '    "outputs": {\n'
        '        "b_doubled": [\n            6\n        ],\n'
        '        "length": [\n            1\n        ],\n'
        '        "s_bytes": [\n            {\n                "b64": "eCE="\n            }\n'
        "        ],\n"
        '        "sum": [\n            6.0\n        ]\n'
        "    }\n"
        "}"
    )
    assert response.content.decode() == expected


def test_b64_only_for_string_inputs(client: RestClient) -> None:
    response = client.post(
        "/v1/models/multi_io:predict",
        '{"signature_name": "double_only", "instances": [{"b64": "AQ=="}]}',
    )
    assert response.status_code == 400
    assert error_of(response) == (
        "Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: "
        'JSON Value: {\n    "b64": "AQ=="\n} Type: Object is not of expected type: int64'
    )


def test_integer_input_rejects_a_float(client: RestClient) -> None:
    body = '{"signature_name": "double_only", "instances": [1, 1.0]}'
    response = client.post("/v1/models/multi_io:predict", body)
    assert response.status_code == 400
    assert error_of(response) == (
        "Failed to process element: 1 of 'instances' list. Error: INVALID_ARGUMENT: "
        "JSON Value: 1.0 Type: Number is not of expected type: int64"
    )
    ok = client.post("/v1/models/multi_io:predict", body.replace("1.0", "21"))
    assert ok.content == b'{\n    "predictions": [2, 42\n    ]\n}'


# ----------------------------------------------------------------------------- classify/regress


def test_regress_on_tf_examples(client: RestClient) -> None:
    body = {
        "signature_name": "regress_x_to_y",
        "examples": [{"x": 1.0}, {"x": 2.0}, {"x": 5}],
    }
    body["examples"][2] = {"x": 5.0}
    response = client.post("/v1/models/half_plus_two_2_versions:regress", json.dumps(body))
    assert response.status_code == 200, response.text
    assert response.content == b'{\n    "results": [2.5, 3.0, 4.5]\n}'


def test_regress_with_context(client: RestClient) -> None:
    body = {
        "signature_name": "regress_x_to_y",
        "context": {"x": 4.0},
        "examples": [{}, {}],
    }
    response = client.post("/v1/models/half_plus_two_2_versions:regress", json.dumps(body))
    assert response.status_code == 200, response.text
    # the context's features go into every example: y = 0.5 * 4 + 2
    assert response.content == b'{\n    "results": [4.0, 4.0]\n}'


def test_regress_on_tf1_model_regress_signature(client: RestClient) -> None:
    body = {"signature_name": "tensorflow/serving/regress", "examples": [{"x": 1.0}]}
    response = client.post("/v1/models/hp3/versions/124:regress", json.dumps(body))
    assert response.status_code == 200, response.text
    assert response.content == b'{\n    "results": [4.5]\n}'


def test_classify_on_tf_examples(client: RestClient) -> None:
    body = {"signature_name": "classify_x_to_y", "examples": [{"x": 1.0}, {"x": -2.0}]}
    response = client.post("/v1/models/half_plus_two_2_versions:classify", json.dumps(body))
    assert response.status_code == 200, response.text
    assert response.content == b'{\n    "results": [[["", 2.5]], [["", 1.0]]]\n}'


# ----------------------------------------------------------------------------- status, metadata


def test_status_is_byte_exact(client: RestClient) -> None:
    response = client.get("/v1/models/half_plus_three")
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    assert response.text == STATUS_123


def test_status_versions_newest_first_and_filters(client: RestClient) -> None:
    versions = [s["version"] for s in client.get("/v1/models/hp3").json()["model_version_status"]]
    assert versions == ["124", "123"]
    one = client.get("/v1/models/hp3/versions/123").json()["model_version_status"]
    assert [s["version"] for s in one] == ["123"]
    labelled = client.get("/v1/models/hp3/labels/canary").json()["model_version_status"]
    assert [s["version"] for s in labelled] == ["124"]


@pytest.mark.parametrize(
    ("model", "directory"),
    [
        ("half_plus_two_2_versions", "saved_model_half_plus_two_2_versions"),
        ("tf1_cpu", "saved_model_half_plus_two_cpu"),
        ("tf2", None),
    ],
)
def test_metadata_matches_tf_serving(
    client: RestClient, testdata_dir: Path, model: str, directory: str | None
) -> None:
    response = client.get(f"/v1/models/{model}/versions/123/metadata")
    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"] == "application/json"
    document = response.json()
    assert document["model_spec"] == {"name": model, "signature_name": "", "version": "123"}
    signatures = document["metadata"]["signature_def"]["signature_def"]
    if directory is None:
        assert signatures["serving_default"]["method_name"] == "tensorflow/serving/predict"
        return
    assert signatures["serving_default"]["inputs"]["x"] == {  # TF Serving's way of printing it
        "dtype": "DT_FLOAT",
        "tensor_shape": {
            "dim": [{"size": "-1", "name": ""}, {"size": "1", "name": ""}],
            "unknown_rank": False,
        },
        "name": "x:0",
    }
    expected = tfs_metadata.signature_def_map(testdata_dir / directory / "00000123")
    assert document["metadata"]["signature_def"] == expected


# ----------------------------------------------------------------------------- errors

PREDICT = "/v1/models/half_plus_three:predict"


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ("", 400, "JSON Parse error: The document is empty. at offset: 0"),
        ("whatever", 400, "JSON Parse error: Invalid value. at offset: 0"),
        ("[1, 2]", 400, "JSON Value: [1, 2] Is not object"),
        ('{"signature_name": "serving_default"}', 400, "Missing 'inputs' or 'instances' key"),
        (
            '{"instances": [1.0], "inputs": [1.0]}',
            400,
            'JSON Value: {\n    "instances": [1.0],\n    "inputs": [1.0]\n} Not formatted '
            "correctly expecting only one of 'inputs' or 'instances' keys to exist ",
        ),
        (
            '{"instances": []}',
            400,
            "JSON Value: {\n    \"instances\": []\n} No values in 'instances' array",
        ),
        (
            '{"instances": 1.0}',
            400,
            "JSON Value: {\n    \"instances\": 1.0\n} Expecting 'instances' to be an list/array",
        ),
        (
            '{"instances": ["]["]}',
            400,
            "Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: "
            'JSON Value: "][" Type: String is not of expected type: float',
        ),
        (
            '{"instances": [{"junk": 1.0}]}',
            400,
            "Failed to process element: 0 key: junk of 'instances' list. Error: "
            "INVALID_ARGUMENT: JSON object: does not have named input: junk",
        ),
        (
            '{"signature_name": "foo", "instances": [1.0]}',
            400,
            'Serving signature name: "foo" not found in signature def',
        ),
    ],
)
def test_predict_error_table(client: RestClient, body: str, status: int, message: str) -> None:
    response = client.post(PREDICT, body)
    assert response.status_code == status
    assert response.headers["Content-Type"] == "application/json"
    assert response.content == error_body(message)


def test_ragged_list(client: RestClient) -> None:
    response = client.post(
        "/v1/models/half_plus_two_2_versions:predict", '{"instances": [[1.0, 2.0, 3.0], [1, 2]]}'
    )
    assert response.status_code == 400
    assert (
        error_of(response) == "Encountered list at unexpected size: 2 at level: 1 expected size: 3"
    )


def test_several_inputs_need_objects(client: RestClient) -> None:
    response = client.post("/v1/models/multi_io:predict", '{"instances": [1, 2]}')
    assert response.status_code == 400
    assert error_of(response) == (
        "instances is a plain list, but expecting list of objects as multiple input tensors "
        "required as per tensorinfo_map"
    )


def test_long_values_are_cut_at_256_bytes(client: RestClient) -> None:
    response = client.post(PREDICT, json.dumps([1.0] * 200))
    message = error_of(response)
    assert message.startswith("JSON Value: [1.0, 1.0, ")
    assert message.endswith(" Is not object")
    quoted = message[len("JSON Value: ") : -len(" Is not object")]
    assert len(quoted.encode()) == 256


@pytest.mark.parametrize(
    ("method", "path", "status", "message"),
    [
        ("POST", "/v1/models/nope:predict", 404, "Servable not found for request: Latest(nope)"),
        (
            "POST",
            "/v1/models/hp3/versions/3:predict",
            404,
            "Servable not found for request: Specific(hp3, 3)",
        ),
        ("GET", "/v1/models/nope", 404, "Could not find any versions of model nope"),
        ("GET", "/v1/models/hp3/versions/3", 404, "Could not find version 3 of model hp3"),
        ("GET", "/v1/models", 400, "Missing model name in request."),
        (
            "POST",
            "/v1/models/hp3/labels/nope:predict",
            400,
            "Unrecognized servable version label: nope",
        ),
        ("POST", "/v1/models/x:foo", 400, "Malformed request: POST /v1/models/x:foo"),
        ("POST", "/v1/models/x:PREDICT", 400, "Malformed request: POST /v1/models/x:PREDICT"),
        ("GET", "/v1/models/x:predict", 400, "Malformed request: GET /v1/models/x:predict"),
        ("PUT", "/v1/models/x", 400, "Malformed request: PUT /v1/models/x"),
        (
            "POST",
            "/v1/models/hp3/versions/1/labels/x:predict",
            400,
            "Both model version (1) and model version label (x) cannot be supplied.",
        ),
    ],
)
def test_routing_errors(
    client: RestClient, method: str, path: str, status: int, message: str
) -> None:
    response = client.request(method, path, b'{"instances": [1.0]}' if method == "POST" else b"")
    assert response.status_code == status
    assert response.headers["Content-Type"] == "application/json"
    assert response.content == error_body(message)


def test_server_keeps_serving_after_bad_requests(server: Any) -> None:
    """Garbage on the socket closes that connection only; the server answers the next one."""
    with socket.create_connection(("127.0.0.1", server.rest_port), timeout=10) as sock:
        sock.sendall(b"\x00\x01garbage\r\n\r\n")
        reply = sock.recv(4096)
    assert reply.startswith(b"HTTP/1.")
    assert b"application/json" in reply
    response = RestClient(server.rest_url).post(PREDICT, '{"instances": [1.0]}')
    assert response.status_code == 200


def test_keep_alive_and_concurrent_requests(server: Any) -> None:
    client = RestClient(server.rest_url)

    def call(value: int) -> Any:
        return client.post(PREDICT, json.dumps({"instances": [float(value)]})).json()

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(call, range(40)))
    assert results == [{"predictions": [0.5 * v + 3]} for v in range(40)]


@pytest.mark.parametrize(
    ("path", "body", "status", "message"),
    [
        ("/v1/models/nope:regress", '{"x": 1}', 400, "Missing 'examples' key"),
        (
            "/v1/models/nope:classify",
            '{"examples": {"x": 1.0}}',
            400,
            'JSON Value: {\n    "examples": {\n        "x": 1.0\n    }\n} '
            "Expecting 'examples' to be an list/array",
        ),
        (
            "/v1/models/nope:regress",
            '{"examples": [{"x": 1.0}]}',
            404,
            "Servable not found for request: Latest(nope)",
        ),
    ],
)
def test_classify_regress_errors(
    client: RestClient, path: str, body: str, status: int, message: str
) -> None:
    """The examples are read before the model is looked up, as TF Serving does."""
    response = client.post(path, body)
    assert response.status_code == status
    assert response.content == error_body(message)


def test_regress_on_a_predict_signature_is_refused_by_its_keys(client: RestClient) -> None:
    """Method names are not checked by default (TF Serving since 2.4); the signature's keys
    are: serving_default takes ``x``, not ``inputs``."""
    response = client.post("/v1/models/half_plus_three:regress", '{"examples": [{"x": 1.0}]}')
    assert response.status_code == 400
    assert response.json()["error"].startswith("No regression inputs found in SignatureDef: ")
    assert 'method_name: "tensorflow/serving/predict"' in response.json()["error"]


def test_classify_and_regress_on_tf2_signatures(client: RestClient) -> None:
    """TF2 SavedModels mark every signature tensorflow/serving/predict: they answer."""
    body = '{"signature_name": "%s", "examples": [{"x": 2.0}]}'
    regressed = client.post("/v1/models/tf2:regress", body % "regress_x_to_y")
    assert regressed.status_code == 200, regressed.text
    assert regressed.json() == {"results": [3.0]}
    classified = client.post("/v1/models/tf2:classify", body % "classify_x_to_y")
    assert classified.status_code == 200, classified.text
    assert classified.json() == {"results": [[["", 3.0]]]}


def test_status_of_a_model_that_failed_to_load(
    tmp_path: Path, testdata_dir: Path, start_model_server: Any
) -> None:
    broken = tmp_path / "broken" / "7"
    broken.mkdir(parents=True)
    (broken / "saved_model.pb").write_bytes(b"not a SavedModel")
    config = tmp_path / "models.config"
    config.write_text(
        model_config(
            [
                {"name": "broken", "base_path": broken.parent},
                {"name": "good", "base_path": testdata_dir / "saved_model_half_plus_three"},
            ]
        )
    )
    server = start_model_server(f"--model_config_file={config}", "--max_num_load_retries=0")
    client = RestClient(server.rest_url)
    response = client.get("/v1/models/broken")
    assert response.status_code == 200
    (status,) = response.json()["model_version_status"]
    assert status["version"] == "7"
    assert status["state"] == "END"
    assert status["status"]["error_code"] != "OK"
    assert status["status"]["error_message"]
    assert response.text.startswith('{\n "model_version_status": [\n  {\n   "version": "7",\n')
    predict = client.post("/v1/models/broken:predict", '{"instances": [1.0]}')
    assert predict.status_code == 404
    assert client.get("/v1/models/good").text == STATUS_123


def test_stateful_counter_signatures_without_inputs(
    testdata_dir: Path, start_model_server: Any
) -> None:
    server = start_model_server(
        "--model_name=counter", f"--model_base_path={testdata_dir / 'saved_model_counter'}"
    )
    client = RestClient(server.rest_url)
    path = "/v1/models/counter:predict"

    def call(signature: str, inputs: str = "{}") -> bytes:
        body = f'{{"signature_name": "{signature}", "inputs": {inputs}}}'
        response = client.post(path, body)
        assert response.status_code == 200, response.text
        return response.content

    assert call("reset_counter") == b'{\n    "outputs": 0.0\n}'
    call("incr_counter")
    assert call("incr_counter_by", '{"delta": 3.0}') == b'{\n    "outputs": 4.0\n}'
    assert call("get_counter") == b'{\n    "outputs": 4.0\n}'
    row = client.post(path, '{"signature_name": "get_counter", "instances": [1]}')
    assert row.status_code == 400
    assert row.json() == {"error": "Tensor name: output has no shape information "}
