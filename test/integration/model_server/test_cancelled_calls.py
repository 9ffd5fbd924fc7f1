"""Calls whose callers gave up while they waited in the batch queue are not run (issue 55).

One batch thread, kept busy by a Predict of the ``sleeper`` model; meanwhile more Predicts
queue behind it: some cancelled by their client, one whose deadline passes, one that stays.
The scheduler's DEBUG line (``Ran batch: tasks=N``) says how many ran in the next batch.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import grpc
import numpy as np
import pytest
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


def test_calls_given_up_in_the_batch_queue_do_not_run(
    start_model_server: Callable[..., ServerHandle], test_models, tmp_path
) -> None:
    parameters = tmp_path / "batching.config"
    parameters.write_text(BATCHING_PARAMETERS)
    server = start_model_server(
        "--model_name=sleeper",
        f"--model_base_path={test_models('sleeper')}",
        "--enable_batching",
        f"--batching_parameters_file={parameters}",
        env={"SAGEMAKER_TFS_LOG_LEVEL": "DEBUG"},
    )
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
    batches = [tuple(map(int, m.groups())) for m in BATCH_LINE.finditer(server.log[start:])]
    assert batches == [(1, 1, 1), (1, 1, 1)]
