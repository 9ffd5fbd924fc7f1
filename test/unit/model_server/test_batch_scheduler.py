"""Merging/splitting, and the batch scheduler with a real NumPy runner."""

from __future__ import annotations

import concurrent.futures

import numpy as np
import pytest
from sagemaker_tfs.model_server.errors import Code, ServingError
from sagemaker_tfs.model_server.serving.batch_scheduler import (
    QUEUE_FULL,
    BatchScheduler,
    merge_input,
    pad_batch,
    split_output,
    task_size,
)
from sagemaker_tfs.model_server.serving.batching_parameters import BatchingParameters


def test_task_size_rules() -> None:
    assert task_size([np.zeros((3, 2)), np.zeros((3,))]) == 3
    with pytest.raises(ServingError, match="equal 0th-dimension size"):
        task_size([np.zeros((3, 2)), np.zeros((2,))])
    with pytest.raises(ServingError, match="at least one dimension"):
        task_size([np.float32(1)])


def test_merge_pads_variable_lengths_with_first_element() -> None:
    merged = merge_input([np.array([[1, 2]]), np.array([[5, 6, 7]])], True, 0)
    np.testing.assert_array_equal(merged, [[1, 2, 1], [5, 6, 7]])
    strings = merge_input(
        [np.array([[b"a"]], dtype=object), np.array([[b"b", b"c"]], dtype=object)], True, 0
    )
    assert strings.tolist() == [[b"a", b"a"], [b"b", b"c"]]
    with pytest.raises(ServingError, match="padding is turned off"):
        merge_input([np.array([[1, 2]]), np.array([[5, 6, 7]])], False, 0)


def test_pad_and_split() -> None:
    padded = pad_batch(np.array([[1.0], [2.0], [3.0]]), 4)
    np.testing.assert_array_equal(padded, [[1.0], [2.0], [3.0], [1.0]])
    parts = split_output(padded * 10, [1, 2], 4)
    assert [part.tolist() for part in parts] == [[[10.0]], [[20.0], [30.0]]]
    with pytest.raises(ServingError, match="0th dimension does not equal"):
        split_output(np.zeros(3), [1, 2], 4)


def test_scheduler_merges_concurrent_tasks_and_returns_each_its_rows() -> None:
    scheduler = BatchScheduler(
        BatchingParameters(max_batch_size=8, batch_timeout_micros=500_000, num_batch_threads=1)
    )
    calls: list[int] = []

    def runner(values):
        calls.append(values[0].shape[0])
        return [values[0] * 2]

    def submit(index: int) -> np.ndarray:
        return scheduler.submit(("m",), [np.array([float(index)])], runner)[0]

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(submit, range(8)))
    scheduler.shutdown()
    assert [result.tolist() for result in results] == [[2.0 * i] for i in range(8)]
    assert sum(calls) == 8 and len(calls) < 8
    assert scheduler.tasks_run == 8


def test_scheduler_limits() -> None:
    scheduler = BatchScheduler(
        BatchingParameters(max_batch_size=4, max_enqueued_batches=1, num_batch_threads=1)
    )
    with pytest.raises(ServingError) as caught:
        scheduler.submit(("m",), [np.zeros(5)], lambda values: values)
    assert caught.value.code == Code.INVALID_ARGUMENT
    assert caught.value.message == "Task size 5 is larger than maximum batch size 4"
    scheduler.shutdown()
    assert QUEUE_FULL == "The batch scheduling queue to which this task was submitted is full"


def test_queues_of_keys_no_task_uses_are_dropped() -> None:
    """Keys come from requests (their inputs and output filters): 200 keys used once each
    leave no queue behind, and a key used again gets a queue again."""
    scheduler = BatchScheduler(
        BatchingParameters(max_batch_size=4, batch_timeout_micros=0, num_batch_threads=1)
    )
    for index in range(200):
        result = scheduler.submit(("m", index), [np.array([1.0])], lambda values: values)
        assert result[0].tolist() == [1.0]
    assert scheduler._queues == {} and not scheduler._order
    assert scheduler.submit(("m", 0), [np.array([2.0])], lambda values: values)[0] == [2.0]
    scheduler.shutdown()
