"""Dynamic batching in a real server process (gRPC and REST share the scheduler).

Batches are observed through the scheduler's DEBUG log line (``Ran batch: tasks=N ...``),
which does not depend on timing: N is how many requests one session run served.
"""

from __future__ import annotations

import concurrent.futures
import re
import threading
import time
from pathlib import Path

import grpc
import numpy as np
import pytest
import requests
from grpc_helpers import float_tensor, output_array, predict_request, prediction_stub
from model_server_process import ServerHandle, start_batching_server, stop_server

pytestmark = pytest.mark.slow

BATCHING_PARAMETERS = """
max_batch_size { value: 16 }
batch_timeout_micros { value: 10000000 }
max_enqueued_batches { value: 1 }
num_batch_threads { value: 1 }
allowed_batch_sizes: 4
allowed_batch_sizes: 8
allowed_batch_sizes: 16
"""
BATCH_LINE = re.compile(r"Ran batch: tasks=(\d+) size=(\d+) padded=(\d+)")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, testdata_dir: Path) -> ServerHandle:
    work = tmp_path_factory.mktemp("batching")
    handle = start_batching_server(
        work,
        testdata_dir / "saved_model_half_plus_three",
        BATCHING_PARAMETERS,
        env={"SAGEMAKER_TFS_LOG_LEVEL": "DEBUG"},
    )
    yield handle
    stop_server(handle)


def _batches(server: ServerHandle, since: int) -> list[tuple[int, int, int]]:
    return [tuple(map(int, m.groups())) for m in BATCH_LINE.finditer(server.log[since:])]


def _predict(stub, values: list) -> np.ndarray:
    response = stub.Predict(predict_request("half_plus_three", {"x": float_tensor(values)}))
    return output_array(response.outputs["y"])


def test_config_is_logged(server: ServerHandle) -> None:
    assert "Batching enabled: max_batch_size: 16, batch_timeout_micros: 10000000" in server.log


def test_concurrent_requests_are_merged_and_split_back(server: ServerHandle) -> None:
    stub = prediction_stub(server.grpc_target)
    start = len(server.log)
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        results = list(pool.map(lambda i: _predict(stub, [float(i)]), range(16)))
    for index, result in enumerate(results):
        np.testing.assert_array_equal(result, [index * 0.5 + 3])
    batches = _batches(server, start)
    assert sum(tasks for tasks, _, _ in batches) == 16
    assert len(batches) < 16


def test_batch_is_padded_to_allowed_size(server: ServerHandle) -> None:
    stub = prediction_stub(server.grpc_target)
    start = len(server.log)
    np.testing.assert_array_equal(_predict(stub, [1.0, 2.0, 3.0]), [3.5, 4.0, 4.5])
    assert _batches(server, start) == [(1, 3, 4)]


def test_task_larger_than_max_batch_size(server: ServerHandle) -> None:
    stub = prediction_stub(server.grpc_target)
    with pytest.raises(grpc.RpcError) as caught:
        _predict(stub, [1.0] * 17)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.details() == "Task size 17 is larger than maximum batch size 16"
    response = requests.post(
        f"{server.rest_url}/v1/models/half_plus_three:predict",
        json={"instances": [1.0] * 17},
        timeout=30,
    )
    assert response.status_code == 400
    assert "Task size 17 is larger than maximum batch size 16" in response.json()["error"]


def test_full_queue_is_unavailable(server: ServerHandle) -> None:
    """A first task opens a batch that waits 10 s; a second that does not fit needs a new
    batch, but max_enqueued_batches is 1, so it is refused at once (gRPC and REST). The 10 s
    leave room for both calls after the 2 s given to the first, on a loaded machine too."""
    stub = prediction_stub(server.grpc_target)
    first_done = threading.Event()
    first = threading.Thread(
        target=lambda: (_predict(stub, [1.0] * 10), first_done.set()), daemon=True
    )
    first.start()
    time.sleep(2.0)
    with pytest.raises(grpc.RpcError) as caught:
        _predict(stub, [1.0] * 10)
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    assert caught.value.details() == (
        "The batch scheduling queue to which this task was submitted is full"
    )
    response = requests.post(
        f"{server.rest_url}/v1/models/half_plus_three:predict",
        json={"instances": [1.0] * 10},
        timeout=30,
    )
    assert response.status_code == 503
    assert "The batch scheduling queue to which this task was submitted is full" in (
        response.json()["error"]
    )
    first.join(timeout=30)
    assert first_done.is_set()


def test_different_shapes_without_padding_fail(server: ServerHandle) -> None:
    stub = prediction_stub(server.grpc_target)

    def send(values: list) -> grpc.RpcError | None:
        try:
            _predict(stub, values)
        except grpc.RpcError as error:
            return error
        return None

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        errors = list(pool.map(send, [[[1.0, 2.0]], [[1.0, 2.0, 3.0]]]))
    assert all(error is not None for error in errors)
    for error in errors:
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "from different tasks have different shapes and padding is turned off" in (
            error.details()
        )
    np.testing.assert_array_equal(_predict(stub, [2.0]), [4.0])
