"""The Prometheus endpoint of ``--monitoring_config_file`` (TF Serving's names, read with
prometheus_client's parser) and CORS preflights, against a real model server."""

from __future__ import annotations

import shutil
from pathlib import Path

import grpc
import pytest
import requests
from flag_cases import MODEL, TF2_MODEL, Y, grpc_predict, metrics, rpc_error
from grpc_helpers import prediction_stub
from tensorflow_serving.apis import regression_pb2

pytestmark = pytest.mark.slow
PATH = "/monitoring/prometheus/metrics"


@pytest.fixture
def server(start_model_server, testdata_dir: Path, tmp_path: Path):  # type: ignore[no-untyped-def]
    shutil.copytree(testdata_dir / TF2_MODEL / "00000123", tmp_path / MODEL / "123")
    config = tmp_path / "monitoring.config"
    config.write_text("prometheus_config {\n  enable: true\n}\n")
    return start_model_server(
        f"--model_name={MODEL}",
        f"--model_base_path={tmp_path / MODEL}",
        f"--monitoring_config_file={config}",
        "--rest_api_enable_cors_support",
    )


def samples(family, suffix: str) -> dict:
    return {
        tuple(sorted(s.labels.items())): s.value
        for s in family.samples
        if s.name == family.name + suffix
    }


def test_requests_runs_and_loads_under_tf_servings_names(server, tmp_path: Path) -> None:
    version_dir = str(tmp_path / MODEL / "123")
    assert requests.post(
        f"{server.rest_url}/v1/models/{MODEL}:predict", json={"instances": [1.0]}, timeout=30
    ).ok
    assert grpc_predict(server.grpc_target) == Y
    regress = regression_pb2.RegressionRequest()
    regress.model_spec.name = MODEL
    regress.model_spec.signature_name = "regress_x_to_y"
    regress.input.example_list.examples.add().features.feature["x"].float_list.value.append(2.0)
    assert prediction_stub(server.grpc_target).Regress(regress, timeout=30).result.regressions
    assert rpc_error(lambda: grpc_predict(server.grpc_target, model="nope")).code() == (
        grpc.StatusCode.NOT_FOUND
    )
    families = metrics(server)
    counts = samples(families[":tensorflow:serving:request_count"], "_total")
    assert counts == {
        (("model_name", MODEL), ("status", "OK")): 3.0,
        # a name it does not serve is counted as "unknown" (docs/model_server.md: a difference)
        (("model_name", "unknown"), ("status", "NOT_FOUND")): 1.0,
    }
    latency = samples(families[":tensorflow:serving:request_latency"], "_count")
    assert latency == {
        (("API", "predict"), ("entrypoint", "REST"), ("model_name", MODEL)): 1.0,
        (("API", "Predict"), ("entrypoint", "GRPC"), ("model_name", MODEL)): 1.0,
        (("API", "Regress"), ("entrypoint", "GRPC"), ("model_name", MODEL)): 1.0,
    }
    runtime = samples(families[":tensorflow:serving:runtime_latency"], "_count")
    assert runtime == {
        (("API", "Predict"), ("model_name", MODEL), ("runtime", "TF1")): 2.0,
        (("API", "Regress"), ("model_name", MODEL), ("runtime", "TF1")): 1.0,
    }
    loads = samples(families[":tensorflow:cc:saved_model:load_attempt_count"], "_total")
    assert loads == {(("model_path", version_dir), ("status", "success")): 1.0}
    stages = samples(families[":tensorflow:cc:saved_model:load_latency_by_stage"], "_count")
    assert set(stages) == {
        (("model_path", version_dir), ("stage", "restore_graph")),
        (("model_path", version_dir), ("stage", "init_graph")),
    }


def test_the_endpoint_answers_any_method_as_plain_text_without_cors(server) -> None:
    for method in ("GET", "POST", "PUT"):
        response = requests.request(method, server.rest_url + PATH, timeout=30)
        assert response.status_code == 200
        assert response.headers["Content-Type"] == "text/plain"
        assert "Access-Control-Allow-Origin" not in response.headers
        assert "# TYPE :tensorflow:serving:request_count counter" in response.text
    assert requests.get(server.rest_url + PATH + "/", timeout=30).status_code == 404


def test_cors_preflight(server) -> None:
    url = f"{server.rest_url}/v1/models/{MODEL}:predict"
    allowed = requests.options(url, headers={"Origin": "https://example.com"}, timeout=30)
    assert allowed.status_code == 200 and allowed.content == b""
    assert allowed.headers["Access-Control-Allow-Origin"] == "*"
    refused = requests.options(url, headers={"Origin": "example.com"}, timeout=30)
    assert refused.status_code == 400
    assert "Origin" in refused.json()["error"]
    assert refused.headers["Access-Control-Allow-Methods"] == "POST, GET"


def test_no_endpoint_without_the_flag(start_model_server, testdata_dir: Path) -> None:
    server = start_model_server(
        f"--model_name={MODEL}", f"--model_base_path={testdata_dir / TF2_MODEL}"
    )
    assert requests.get(server.rest_url + PATH, timeout=30).status_code == 404
    preflight = requests.options(
        f"{server.rest_url}/v1/models/{MODEL}", headers={"Origin": "http://a"}, timeout=30
    )
    assert preflight.status_code == 200  # preflights are answered whatever the CORS flag
    assert "Access-Control-Allow-Origin" not in preflight.headers
