"""Calls whose callers gave up while they waited in the batch queue are not run (issue 55).

One batch thread, kept busy by a Predict of the ``sleeper`` model; meanwhile more Predicts
queue behind it: over gRPC some cancelled by their client, one whose deadline passes, one that
stays; over REST some whose client closes its connection, one that stays. The scheduler's
DEBUG line (``Ran batch: tasks=N``) says how many ran in the next batch.
"""

from __future__ import annotations

import concurrent.futures
import json
import re
import socket
import time
from collections.abc import Callable

import grpc
import numpy as np
import pytest
import requests
from grpc_helpers import float_tensor, output_array, predict_request, prediction_stub
from model_server_process import ServerHandle

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

BATCHING_PARAMETERS = """
max_batch_size { value: 8 }
batch_timeout_micros { value: 1000 }
max_enqueued_batches { value: 4 }
num_batch_threads { value: 1 }
"""
BATCH_LINE = re.compile(r"Ran batch: tasks=(\d+) size=(\d+) padded=(\d+)")
BUSY_SECONDS = 4.0


def _start(
    start_model_server: Callable[..., ServerHandle], test_models, tmp_path, *flags: str
) -> ServerHandle:
    parameters = tmp_path / "batching.config"
    parameters.write_text(BATCHING_PARAMETERS)
    return start_model_server(
        "--model_name=sleeper",
        f"--model_base_path={test_models('sleeper')}",
        "--enable_batching",
        f"--batching_parameters_file={parameters}",
        *flags,
        env={"SAGEMAKER_TFS_LOG_LEVEL": "DEBUG"},
    )


def _batches(server: ServerHandle, since: int) -> list[tuple[int, ...]]:
    return [tuple(map(int, m.groups())) for m in BATCH_LINE.finditer(server.log[since:])]


def test_grpc_calls_given_up_in_the_batch_queue_do_not_run(
    start_model_server: Callable[..., ServerHandle], test_models, tmp_path
) -> None:
    server = _start(start_model_server, test_models, tmp_path)
    stub = prediction_stub(server.grpc_target)
    start = len(server.log)

    def call(seconds: float, timeout: float = 60.0) -> grpc.Future:
        request = predict_request("sleeper", {"seconds": float_tensor([seconds])})
        return stub.Predict.future(request, timeout=timeout)

    busy = call(BUSY_SECONDS)
    time.sleep(1.0)  # its batch runs: the next calls wait in the queue
    given_up = [call(0.0) for _ in range(3)]
    expires = call(0.0, timeout=1.0)
    stays = call(0.0)
    time.sleep(0.5)
    for future in given_up:
        future.cancel()

    np.testing.assert_array_equal(output_array(busy.result().outputs["seconds"]), [BUSY_SECONDS])
    np.testing.assert_array_equal(output_array(stays.result().outputs["seconds"]), [0.0])
    with pytest.raises(grpc.RpcError) as expired:
        expires.result()
    assert expired.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert all(future.cancelled() for future in given_up)
    assert _batches(server, start) == [(1, 1, 1), (1, 1, 1)]


def _rest_request(seconds: float) -> bytes:
    body = json.dumps({"instances": [seconds]}).encode()
    head = (
        "POST /v1/models/sleeper:predict HTTP/1.1\r\nHost: model-server\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


@pytest.mark.parametrize(
    "threads",
    [(), ("--rest_api_num_threads=1",)],
    ids=["waiting-in-the-batch-queue", "waiting-for-a-rest-thread"],
)
def test_rest_requests_whose_clients_went_do_not_run(
    start_model_server: Callable[..., ServerHandle], test_models, tmp_path, threads
) -> None:
    """With one REST thread, held by the busy request in the batcher, the others wait for the
    thread rather than in the batch queue."""
    server = _start(start_model_server, test_models, tmp_path, *threads)
    start = len(server.log)
    url = f"{server.rest_url}/v1/models/sleeper:predict"

    def post(seconds: float) -> dict:
        response = requests.post(url, json={"instances": [seconds]}, timeout=60)
        response.raise_for_status()
        return response.json()

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        busy = pool.submit(post, BUSY_SECONDS)
        time.sleep(1.0)  # its batch runs: the next requests wait in the queue
        gone = [socket.create_connection(("127.0.0.1", server.rest_port)) for _ in range(3)]
        for sock in gone:
            sock.sendall(_rest_request(0.0))
        stays = pool.submit(post, 0.0)
        time.sleep(0.5)
        for sock in gone:
            sock.close()
        assert busy.result() == {"predictions": [BUSY_SECONDS]}
        assert stays.result() == {"predictions": [0.0]}
    assert _batches(server, start) == [(1, 1, 1), (1, 1, 1)]
