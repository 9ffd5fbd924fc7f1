"""The status socket beside ``--grpc_socket_path`` (``serve_status`` of ``grpc/server.py``):
GetModelStatus on a server and thread pool of its own, for the supervisor's health checks.

The proof that it is needed and that it works: every thread of the main gRPC server (64) is
kept busy by a Predict of the ``sleeper`` model; a GetModelStatus on the main socket then
waits in the pool's queue past its deadline, while one on the status socket answers at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest
from grpc_helpers import float_tensor, model_stub, prediction_stub
from model_server_process import ServerHandle
from sagemaker_tfs.settings import status_socket_beside
from tensorflow_serving.apis import get_model_status_pb2, predict_pb2

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

AVAILABLE = get_model_status_pb2.ModelVersionStatus.AVAILABLE
MAIN_POOL_THREADS = 64  # grpc/server.py's serve's default
SLEEP_SECONDS = 8.0  # longer than the checks below: the calls hold their threads throughout


def status_request(name: str) -> get_model_status_pb2.GetModelStatusRequest:
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = name
    return request


def test_status_socket_answers_while_every_grpc_thread_runs_a_predict(
    start_model_server: Callable[..., ServerHandle], test_models, tmp_path: Path
) -> None:
    socket_path = tmp_path / "grpc.sock"
    status_path = status_socket_beside(str(socket_path))
    assert status_path == f"{socket_path}.status"
    server = start_model_server(
        "--model_name=sleeper",
        f"--model_base_path={test_models('sleeper')}",
        f"--grpc_socket_path={socket_path}",
        # Every sleeping call may hold a TensorFlow thread: the pool of gRPC is what fills.
        "--tensorflow_inter_op_parallelism=128",
    )
    assert Path(status_path).exists()
    status = model_stub(f"unix:{status_path}")
    main = model_stub(f"unix:{socket_path}")
    answer = status.GetModelStatus(status_request("sleeper"), timeout=5)
    assert answer.model_version_status[0].state == AVAILABLE

    predict = prediction_stub(f"unix:{socket_path}")
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "sleeper"
    request.inputs["seconds"].CopyFrom(float_tensor([SLEEP_SECONDS]))
    calls = [
        predict.Predict.future(request, timeout=SLEEP_SECONDS + 30)
        for _ in range(MAIN_POOL_THREADS + 4)
    ]
    try:
        time.sleep(2.0)  # every thread of the main pool has taken a call by now
        assert not any(call.done() for call in calls)
        with pytest.raises(grpc.RpcError) as queued:
            main.GetModelStatus(status_request("sleeper"), timeout=1.0)
        assert queued.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        started = time.monotonic()
        answer = status.GetModelStatus(status_request("sleeper"), timeout=1.0)
        assert time.monotonic() - started < 1.0
        assert answer.model_version_status[0].state == AVAILABLE
        with pytest.raises(grpc.RpcError) as unknown:  # NOT_FOUND: an answer all the same
            status.GetModelStatus(status_request("nope"), timeout=1.0)
        assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
        with pytest.raises(grpc.RpcError) as other:  # nothing but the status there
            prediction_stub(f"unix:{status_path}").Predict(request, timeout=1.0)
        assert other.value.code() == grpc.StatusCode.UNIMPLEMENTED
    finally:
        for call in calls:
            call.cancel()
        server.stop()


def test_no_status_socket_without_a_grpc_socket(
    start_model_server: Callable[..., ServerHandle], test_models, tmp_path: Path
) -> None:
    server = start_model_server(
        "--model_name=half_plus_three", f"--model_base_path={test_models('half_plus_three')}"
    )
    assert "GetModelStatus for health checks" not in server.log
    assert not list(tmp_path.glob("*.status"))


def test_a_path_too_long_for_a_status_socket_is_none() -> None:
    longest = "/" + "s" * 99 + ".sock"  # 105 bytes: fits alone, not with ".status"
    assert status_socket_beside(longest) is None
