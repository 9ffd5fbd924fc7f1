"""The batching errors of TF Serving's REST API, over REST on a real server with batching on."""

from __future__ import annotations

import concurrent.futures
import json
import time
from pathlib import Path
from typing import Any

import pytest
from model_server_process import start_batching_server, stop_server
from rest_helpers import RestClient

pytestmark = pytest.mark.slow

PREDICT = "/v1/models/half_plus_three:predict"

# One open batch at a time, held open for 20 s unless it fills up (2 items).
BATCHING = """
max_batch_size { value: 2 }
batch_timeout_micros { value: 20000000 }
max_enqueued_batches { value: 1 }
num_batch_threads { value: 1 }
"""


@pytest.fixture(scope="module")
def batching_server(tmp_path_factory: pytest.TempPathFactory, testdata_dir: Path):
    tmp = tmp_path_factory.mktemp("rest_batching")
    handle = start_batching_server(tmp, testdata_dir / "saved_model_half_plus_three", BATCHING)
    yield handle
    stop_server(handle)


def test_task_larger_than_max_batch_size(batching_server: Any) -> None:
    response = RestClient(batching_server.rest_url).post(PREDICT, '{"instances": [1.0, 2.0, 3.0]}')
    assert response.status_code == 400
    assert response.headers["Content-Type"] == "application/json"
    assert response.content == (
        b'{\n    "error": "Task size 3 is larger than maximum batch size 2"\n}'
    )


def test_queue_full_is_503_and_merged_batch_still_answers(batching_server: Any) -> None:
    """A 1-item request opens the only batch; a 2-item one cannot fit nor open another."""
    url = batching_server.rest_url
    warm_up = RestClient(url).post(PREDICT, '{"instances": [0.0, 0.0]}')  # a full batch: runs
    assert warm_up.status_code == 200
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(RestClient(url).post, PREDICT, '{"instances": [1.0]}')
        time.sleep(5.0)  # the first request is now in the open batch (20 s timeout)
        assert not waiting.done()
        rejected = RestClient(url).post(PREDICT, '{"instances": [2.0, 3.0]}')
        merged = RestClient(url).post(PREDICT, '{"instances": [5.0]}')  # fills the batch
        first = waiting.result(timeout=30)
    assert rejected.status_code == 503
    assert rejected.headers["Content-Type"] == "application/json"
    assert json.loads(rejected.content) == {
        "error": "The batch scheduling queue to which this task was submitted is full"
    }
    assert merged.status_code == 200
    assert merged.content == b'{\n    "predictions": [5.5\n    ]\n}'
    assert first.content == b'{\n    "predictions": [3.5\n    ]\n}'
