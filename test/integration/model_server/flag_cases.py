"""One case per ``tensorflow_model_server`` flag: the flag in TF Serving's syntax (with the
flags it needs to show anything) and a check of what a client sees with it.

``test_tf_serving_flags.py`` starts a real model server per case. Every case serves
``hp2``, a copy of TF Serving's TF2 half_plus_two (version 123, y = 0.5x + 2), unless it
brings its own model flags. Flags that only tune TF Serving's C++ runtime are checked for
their one "no effect" log line and an unchanged answer.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import grpc
import numpy as np
import pytest
import requests
import tls_files
from grpc_helpers import float_tensor, model_stub, output_array, predict_request, prediction_stub
from local_ports import free_port
from model_server_process import ServerHandle, wait_for
from prometheus_client.parser import text_string_to_metric_families
from tensorflow_serving.apis import classification_pb2, get_model_status_pb2, prediction_log_pb2

MODEL = "hp2"
TF2_MODEL = "saved_model_half_plus_two_tf2_cpu"
X = [1.0, 2.0]
Y = [2.5, 3.0]
AVAILABLE = get_model_status_pb2.ModelVersionStatus.State.AVAILABLE
END = get_model_status_pb2.ModelVersionStatus.State.END


@dataclasses.dataclass
class Workspace:
    """A test's directory: ``base`` holds the hp2 model (version 123)."""

    root: Path
    testdata: Path

    @property
    def base(self) -> Path:
        return self.root / MODEL

    @property
    def version_dir(self) -> Path:
        return self.base / "123"

    def write(self, name: str, text: str) -> Path:
        path = self.root / name
        path.write_text(text)
        return path

    def config(self, *entries: str) -> Path:
        """A ModelServerConfig file of ``entries`` (``config { ... }`` bodies)."""
        body = "\n".join(
            f"  config {{ {entry} model_platform: 'tensorflow' }}" for entry in entries
        )
        return self.write("models.config", "model_config_list {\n" + body + "\n}\n")

    def broken_model(self) -> Path:
        broken = self.root / "broken" / "1"
        broken.mkdir(parents=True)
        (broken / "saved_model.pb").write_bytes(b"not a SavedModel")
        return broken.parent


Check = Callable[[ServerHandle, Workspace], None]
CASES: dict[str, Callable[[Workspace], tuple[list[str], Check]]] = {}


def case(name: str):  # type: ignore[no-untyped-def]
    def register(function):  # type: ignore[no-untyped-def]
        CASES[name] = function
        return function

    return register


# ----------------------------------------------------------------------------- client helpers


def grpc_predict(target: str, values: list | float = X, model: str = MODEL, **kwargs) -> list:
    response = prediction_stub(target).Predict(
        predict_request(model, {"x": float_tensor(values)}, **kwargs), timeout=30
    )
    return output_array(response.outputs["y"]).tolist()


def rest_predict(server: ServerHandle, model: str = MODEL) -> requests.Response:
    return requests.post(
        f"{server.rest_url}/v1/models/{model}:predict", json={"instances": X}, timeout=30
    )


def rpc_error(call: Callable[[], object]) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        call()
    return caught.value


def status(server: ServerHandle, model: str = MODEL) -> list[tuple[int, int, str]]:
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = model
    response = model_stub(server.grpc_target).GetModelStatus(request, timeout=30)
    return [(s.version, s.state, s.status.error_message) for s in response.model_version_status]


def answers_as_usual(server: ServerHandle, _: Workspace | None = None) -> None:
    assert grpc_predict(server.grpc_target) == Y
    response = rest_predict(server)
    assert response.status_code == 200, response.text
    assert response.json() == {"predictions": Y}


def metrics(server: ServerHandle, path: str = "/monitoring/prometheus/metrics") -> dict:
    response = requests.get(server.rest_url + path, timeout=30)
    assert response.status_code == 200, response.text
    return {f.name: f for f in text_string_to_metric_families(response.text)}


def write_warmup(version_dir: Path, records: list[dict[str, list[float]]]) -> None:
    import tensorflow as tf

    target = version_dir / "assets.extra" / "tf_serving_warmup_requests"
    target.parent.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(target)) as writer:
        for inputs in records:
            log = prediction_log_pb2.PredictionLog()
            for alias, values in inputs.items():
                log.predict_log.request.inputs[alias].CopyFrom(float_tensor(values))
            writer.write(log.SerializeToString())


def monitoring_flag(workspace: Workspace) -> str:
    config = workspace.write("monitoring.config", "prometheus_config { enable: true }")
    return f"--monitoring_config_file={config}"


# ----------------------------------------------------------------------------- ports and REST


@case("port")
def _port(ws: Workspace) -> tuple[list[str], Check]:
    port = free_port()

    def check(server: ServerHandle, _: Workspace) -> None:
        assert server.grpc_port == port
        assert f"Running gRPC ModelServer at 0.0.0.0:{port} ..." in server.log
        assert grpc_predict(f"127.0.0.1:{port}") == Y

    return [f"--port={port}"], check


@case("grpc_socket_path")
def _socket(ws: Workspace) -> tuple[list[str], Check]:
    path = ws.root / "grpc.sock"
    return [f"--grpc_socket_path={path}"], lambda s, _: (
        None if grpc_predict(f"unix:{path}") == Y else pytest.fail("no answer on the socket")
    )


@case("rest_api_port")
def _rest_port(ws: Workspace) -> tuple[list[str], Check]:
    port = free_port()

    def check(server: ServerHandle, _: Workspace) -> None:
        assert f"Exporting HTTP/REST API at:localhost:{port} ..." in server.log
        response = requests.post(
            f"http://127.0.0.1:{port}/v1/models/{MODEL}:predict", json={"instances": X}, timeout=30
        )
        assert response.json() == {"predictions": Y}

    return [f"--rest_api_port={port}"], check


@case("rest_api_num_threads")
def _rest_threads(ws: Workspace) -> tuple[list[str], Check]:
    def check(server: ServerHandle, _: Workspace) -> None:
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(lambda _: rest_predict(server).json(), range(8)))
        assert answers == [{"predictions": Y}] * 8  # one at a time, every one answered
        assert "1 request threads" in server.log

    return ["--rest_api_num_threads=1"], check


@case("rest_api_timeout_in_ms")
def _rest_timeout(ws: Workspace) -> tuple[list[str], Check]:
    def check(server: ServerHandle, _: Workspace) -> None:
        answers_as_usual(server)
        assert "timeout 120000 ms" in server.log

    return ["--rest_api_timeout_in_ms=120000"], check


@case("rest_api_enable_cors_support")
def _cors(ws: Workspace) -> tuple[list[str], Check]:
    def check(server: ServerHandle, _: Workspace) -> None:
        for response in (
            rest_predict(server),
            requests.get(f"{server.rest_url}/v1/models/nope", timeout=30),
        ):
            assert response.headers["Access-Control-Allow-Origin"] == "*"
            assert response.headers["Access-Control-Allow-Methods"] == "POST, GET"
            assert response.headers["Access-Control-Allow-Headers"] == "Content-Type"

    return ["--rest_api_enable_cors_support"], check


# ----------------------------------------------------------------------------- batching


def _batch_of_three_is_refused(server: ServerHandle, _: Workspace) -> None:
    assert grpc_predict(server.grpc_target, [1.0, 2.0]) == Y
    error = rpc_error(lambda: grpc_predict(server.grpc_target, [1.0, 2.0, 3.0]))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details() == "Task size 3 is larger than maximum batch size 2"


@case("enable_batching")
def _batching(ws: Workspace) -> tuple[list[str], Check]:
    def check(server: ServerHandle, _: Workspace) -> None:
        assert grpc_predict(server.grpc_target) == Y
        error = rpc_error(lambda: grpc_predict(server.grpc_target, 2.0))  # a scalar
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "must have at least one dimension" in error.details()

    return ["--enable_batching=true"], check


@case("batching_parameters_file")
def _batching_file(ws: Workspace) -> tuple[list[str], Check]:
    path = ws.write("batching.config", "max_batch_size { value: 2 }\n")
    return ["--enable_batching", f"--batching_parameters_file={path}"], _batch_of_three_is_refused


@case("enable_per_model_batching_parameters")
def _per_model_batching(ws: Workspace) -> tuple[list[str], Check]:
    (ws.version_dir / "batching_params.pbtxt").write_text("max_batch_size { value: 2 }\n")
    return ["--enable_batching", "--enable_per_model_batching_parameters"], (
        _batch_of_three_is_refused
    )


# ----------------------------------------------------------------------------- models


@case("model_config_file")
def _config_file(ws: Workspace) -> tuple[list[str], Check]:
    config = ws.config(f"name: 'from_file' base_path: '{ws.base}'")

    def check(server: ServerHandle, _: Workspace) -> None:
        assert grpc_predict(server.grpc_target, model="from_file") == Y
        error = rpc_error(lambda: grpc_predict(server.grpc_target, model="ignored"))
        assert error.code() == grpc.StatusCode.NOT_FOUND  # the file wins over the two flags

    return [
        f"--model_config_file={config}",
        "--model_name=ignored",
        f"--model_base_path={ws.base}",
    ], check


@case("model_config_file_poll_wait_seconds")
def _config_polling(ws: Workspace) -> tuple[list[str], Check]:
    config = ws.config(f"name: '{MODEL}' base_path: '{ws.base}'")

    def check(server: ServerHandle, _: Workspace) -> None:
        ws.config(
            f"name: '{MODEL}' base_path: '{ws.base}'", f"name: 'added' base_path: '{ws.base}'"
        )
        wait_for(lambda: "(Re-)adding model: added" in server.log)
        wait_for(lambda: status(server, "added")[0][1] == AVAILABLE)
        assert grpc_predict(server.grpc_target, model="added") == Y

    return [f"--model_config_file={config}", "--model_config_file_poll_wait_seconds=1"], check


@case("model_name")
def _model_name(ws: Workspace) -> tuple[list[str], Check]:
    def check(server: ServerHandle, _: Workspace) -> None:
        assert grpc_predict(server.grpc_target, model="renamed") == Y

    return ["--model_name=renamed", f"--model_base_path={ws.base}"], check


@case("model_base_path")
def _model_base_path(ws: Workspace) -> tuple[list[str], Check]:
    def check(server: ServerHandle, _: Workspace) -> None:
        assert grpc_predict(server.grpc_target, model="default") == Y

    return [f"--model_base_path={ws.base}"], check


def _broken_beside_good(ws: Workspace) -> str:
    config = ws.config(
        f"name: '{MODEL}' base_path: '{ws.base}'",
        f"name: 'broken' base_path: '{ws.broken_model()}'",
    )
    return f"--model_config_file={config}"


@case("max_num_load_retries")
def _retries(ws: Workspace) -> tuple[list[str], Check]:
    def check(server: ServerHandle, _: Workspace) -> None:
        [(version, state, message)] = status(server, "broken")
        assert (version, state) == (1, END) and "failed" in message
        assert "retrying" not in server.log
        answers_as_usual(server)

    return [_broken_beside_good(ws), "--max_num_load_retries=0"], check


@case("load_retry_interval_micros")
def _retry_interval(ws: Workspace) -> tuple[list[str], Check]:
    def check(server: ServerHandle, _: Workspace) -> None:
        # TF Serving's 5 retries, 0.1 s apart instead of a minute: start-up took seconds
        assert server.log.count("Loading broken version 1 failed, retrying") == 5
        assert status(server, "broken")[0][1] == END
        answers_as_usual(server)

    return [
        _broken_beside_good(ws),
        "--load_retry_interval_micros=100000",
        "--max_num_load_retries=5",
    ], check


@case("file_system_poll_wait_seconds")
def _fs_poll(ws: Workspace) -> tuple[list[str], Check]:
    def check(server: ServerHandle, _: Workspace) -> None:
        shutil.copytree(ws.version_dir, ws.base / "124")
        time.sleep(3)  # 0: the base path was scanned once, at start-up
        assert [version for version, _, _ in status(server)] == [123]

    return ["--file_system_poll_wait_seconds=0"], check


@case("saved_model_tags")
def _tags(ws: Workspace) -> tuple[list[str], Check]:
    def check(server: ServerHandle, _: Workspace) -> None:
        [(version, state, message)] = status(server)
        assert (version, state) == (123, END)
        assert "gpu" in message and "serve" in message  # no MetaGraph has both tags

    return ["--saved_model_tags=serve,gpu"], check


@case("allow_version_labels_for_unavailable_models")
def _labels(ws: Workspace) -> tuple[list[str], Check]:
    config = ws.config(
        f"name: '{MODEL}' base_path: '{ws.base}' "
        "version_labels { key: 'now' value: 123 } version_labels { key: 'next' value: 124 }"
    )

    def check(server: ServerHandle, _: Workspace) -> None:
        assert grpc_predict(server.grpc_target, label="now") == Y
        error = rpc_error(lambda: grpc_predict(server.grpc_target, label="next"))
        assert error.code() == grpc.StatusCode.NOT_FOUND  # labelled, not loaded

    return [f"--model_config_file={config}", "--allow_version_labels_for_unavailable_models"], check


# ----------------------------------------------------------------------------- sessions


def _session_flag(arg: str) -> Callable[[Workspace], tuple[list[str], Check]]:
    def make(ws: Workspace) -> tuple[list[str], Check]:
        def check(server: ServerHandle, _: Workspace) -> None:
            answers_as_usual(server)
            assert arg in server.log  # the flags in effect, logged once at start-up

        return [arg], check

    return make


for _name, _arg in (
    ("tensorflow_session_parallelism", "--tensorflow_session_parallelism=1"),
    ("tensorflow_intra_op_parallelism", "--tensorflow_intra_op_parallelism=1"),
    ("tensorflow_inter_op_parallelism", "--tensorflow_inter_op_parallelism=1"),
    ("per_process_gpu_memory_fraction", "--per_process_gpu_memory_fraction=0.500000"),
):
    case(_name)(_session_flag(_arg))


@case("tensorflow_session_config_file")
def _session_config(ws: Workspace) -> tuple[list[str], Check]:
    path = ws.write(
        "session.config", "intra_op_parallelism_threads: 1 use_per_session_threads: true"
    )
    return [f"--tensorflow_session_config_file={path}"], answers_as_usual


# ----------------------------------------------------------------------------- gRPC


@case("ssl_config_file")
def _ssl(ws: Workspace) -> tuple[list[str], Check]:
    files = tls_files.make_server_certificate(ws.root)
    config = ws.write(
        "ssl.config",
        f'server_key: "{tls_files.escape(files.key)}"\n'
        f'server_cert: "{tls_files.escape(files.certificate)}"\n',
    )

    def check(server: ServerHandle, _: Workspace) -> None:
        credentials = grpc.ssl_channel_credentials(root_certificates=files.certificate.encode())
        channel = grpc.secure_channel(
            server.grpc_target,
            credentials,
            options=[("grpc.ssl_target_name_override", tls_files.HOST_NAME)],
        )
        from tensorflow_serving.apis import prediction_service_pb2_grpc

        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        response = stub.Predict(predict_request(MODEL, {"x": float_tensor(X)}), timeout=30)
        assert output_array(response.outputs["y"]).tolist() == Y
        error = rpc_error(lambda: grpc_predict(server.grpc_target))  # plain text: refused
        assert error.code() == grpc.StatusCode.UNAVAILABLE
        assert rest_predict(server).json() == {"predictions": Y}  # REST stays plain HTTP

    return [f"--ssl_config_file={config}"], check


@case("grpc_channel_arguments")
def _channel_arguments(ws: Workspace) -> tuple[list[str], Check]:
    def check(server: ServerHandle, _: Workspace) -> None:
        assert grpc_predict(server.grpc_target) == Y
        error = rpc_error(lambda: grpc_predict(server.grpc_target, list(range(1000))))
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED

    return ["--grpc_channel_arguments=grpc.max_receive_message_length=2000"], check


@case("enable_grpc_healthcheck_service")
def _health(ws: Workspace) -> tuple[list[str], Check]:
    def check(server: ServerHandle, _: Workspace) -> None:
        from grpc_health.v1 import health_pb2, health_pb2_grpc

        stub = health_pb2_grpc.HealthStub(grpc.insecure_channel(server.grpc_target))
        for service in ("", "ModelService", "PredictionService"):
            answer = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=30)
            assert answer.status == health_pb2.HealthCheckResponse.SERVING
        error = rpc_error(
            lambda: stub.Check(health_pb2.HealthCheckRequest(service="tensorflow.serving.X"))
        )
        assert error.code() == grpc.StatusCode.NOT_FOUND

    return ["--enable_grpc_healthcheck_service=true"], check


@case("enable_serialization_as_tensor_content")
def _tensor_content(ws: Workspace) -> tuple[list[str], Check]:
    def check(server: ServerHandle, _: Workspace) -> None:
        response = prediction_stub(server.grpc_target).Predict(
            predict_request(MODEL, {"x": float_tensor(X)}), timeout=30
        )
        assert response.outputs["y"].tensor_content and not response.outputs["y"].float_val
        assert output_array(response.outputs["y"]).tolist() == Y

    return ["--enable_serialization_as_tensor_content"], check


# ----------------------------------------------------------------------------- warm-up, metrics


@case("enable_model_warmup")
def _warmup_off(ws: Workspace) -> tuple[list[str], Check]:
    write_warmup(ws.version_dir, [{"wrong": [1.0]}])  # would fail the load if replayed

    def check(server: ServerHandle, _: Workspace) -> None:
        assert status(server)[0][1] == AVAILABLE
        answers_as_usual(server)

    return ["--enable_model_warmup=false"], check


@case("num_request_iterations_for_warmup")
def _warmup_iterations(ws: Workspace) -> tuple[list[str], Check]:
    write_warmup(ws.version_dir, [{"x": [1.0]}, {"x": [2.0]}])

    def check(server: ServerHandle, _: Workspace) -> None:
        runs = metrics(server)[":tensorflow:serving:runtime_latency"]
        [count] = [s.value for s in runs.samples if s.name.endswith("_count")]
        assert count == 2 * 3  # each of the 2 records replayed 3 times, before any request
        assert "Number of warmup records read: 2." in server.log

    return ["--num_request_iterations_for_warmup=3", monitoring_flag(ws)], check


@case("monitoring_config_file")
def _monitoring(ws: Workspace) -> tuple[list[str], Check]:
    config = ws.write("monitoring.config", 'prometheus_config { enable: true path: "/my/metrics" }')

    def check(server: ServerHandle, _: Workspace) -> None:
        answers_as_usual(server)
        families = metrics(server, "/my/metrics")
        counts = families[":tensorflow:serving:request_count"].samples
        assert {(s.labels["model_name"], s.labels["status"], s.value) for s in counts} == {
            (MODEL, "OK", 2.0)
        }

    return [f"--monitoring_config_file={config}"], check


# ----------------------------------------------------------------------------- TFLite


# The tensors of half_plus_two as today's TF converter names them (make_test_models'
# write_half_plus_two_tflite): TF Serving serves them as the keys of a generated signature.
CONVERTED_INPUT = "serving_default_x:0"
CONVERTED_OUTPUT = "StatefulPartitionedCall:0"


def tflite_predict(target: str, values: list, model: str = MODEL, **kwargs) -> list:
    """Predict on the converter-made half_plus_two, its inputs keyed by tensor names."""
    request = predict_request(model, {CONVERTED_INPUT: float_tensor(values)}, **kwargs)
    response = prediction_stub(target).Predict(request, timeout=30)
    return output_array(response.outputs[CONVERTED_OUTPUT]).tolist()


def answers_from_tflite(server: ServerHandle, _: Workspace) -> None:
    """Predict as the SavedModel answers, concurrently, a batch larger than the part one
    interpreter of a pool runs among them; Classify is not there (TFLite)."""
    large = np.linspace(-10, 10, 601, dtype=np.float32)
    batches = [X] * 7 + [large.tolist()]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda values: tflite_predict(server.grpc_target, values), batches))
    assert answers == [Y] * 7 + [(large * 0.5 + 2).tolist()]
    request = classification_pb2.ClassificationRequest()
    request.model_spec.name = MODEL
    request.model_spec.signature_name = "classify_x_to_y"
    request.input.example_list.examples.add().features.feature["x"].float_list.value.append(2.0)
    error = rpc_error(lambda: prediction_stub(server.grpc_target).Classify(request, timeout=30))
    assert error.code() == grpc.StatusCode.UNIMPLEMENTED  # the SavedModel would classify


# These need ``model.tflite`` in the version directory (test_tf_serving_flags.py writes it).
TFLITE_CHECK = answers_from_tflite
TFLITE_FLAGS = {
    "prefer_tflite_model": ["--prefer_tflite_model"],
    "num_tflite_pools": ["--prefer_tflite_model", "--num_tflite_pools=2"],
    "num_tflite_interpreters_per_pool": [
        "--prefer_tflite_model",
        "--num_tflite_interpreters_per_pool=2",
    ],
}


# ----------------------------------------------------------------------------- method names


@case("enable_signature_method_name_check")
def _method_check(ws: Workspace) -> tuple[list[str], Check]:
    def check(server: ServerHandle, _: Workspace) -> None:
        assert grpc_predict(server.grpc_target) == Y
        body = {"signature_name": "classify_x_to_y", "examples": [{"x": 2.0}]}
        response = requests.post(
            f"{server.rest_url}/v1/models/{MODEL}:classify", json=body, timeout=30
        )
        assert response.status_code == 400
        assert response.json()["error"] == (
            "Expected classification signature method_name to be tensorflow/serving/classify. "
            "Was: tensorflow/serving/predict"
        )

    return ["--enable_signature_method_name_check"], check


# ----------------------------------------------------------------------------- runtime only

RUNTIME_ONLY = {
    "num_load_threads": "--num_load_threads=2",
    "num_unload_threads": "--num_unload_threads=2",
    "flush_filesystem_caches": "--flush_filesystem_caches=false",
    "use_alts_credentials": "--use_alts_credentials",
    "platform_config_file": "--platform_config_file=/dev/null",
    "grpc_max_threads": "--grpc_max_threads=3",
    "remove_unused_fields_from_bundle_metagraph": "--remove_unused_fields_from_bundle_metagraph=0",
    "xla_cpu_compilation_enabled": "--xla_cpu_compilation_enabled=true",
    "xla_gpu_compilation_enabled": "--xla_gpu_compilation_enabled=true",
    "enable_profiler": "--enable_profiler=false",
    "thread_pool_factory_config_file": "--thread_pool_factory_config_file=/dev/null",
    "mixed_precision": "--mixed_precision=bfloat16",
    "skip_initialize_tpu": "--skip_initialize_tpu",
}


def _runtime_only(name: str, arg: str) -> Callable[[Workspace], tuple[list[str], Check]]:
    def make(ws: Workspace) -> tuple[list[str], Check]:
        def check(server: ServerHandle, _: Workspace) -> None:
            line = f"--{name} has no effect in this model server"
            assert server.log.count(line) == 1
            answers_as_usual(server)

        return [arg], check

    return make


for _name, _arg in RUNTIME_ONLY.items():
    case(_name)(_runtime_only(_name, _arg))
