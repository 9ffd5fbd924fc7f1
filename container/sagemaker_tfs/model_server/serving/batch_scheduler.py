"""Dynamic batching: one batch scheduler shared by every servable of the process.

Semantics follow TF Serving's session batching:

- one queue per (model, version, signature, input aliases, output aliases); requests merge
  only when they feed and fetch the same tensors;
- a queue holds batches; a task joins the open (newest) batch if it fits, otherwise a new
  batch is opened, which fails with UNAVAILABLE when ``max_enqueued_batches`` are queued;
- a closed batch runs as soon as a batch thread is free; the open batch runs when full, or
  when its oldest task has waited ``batch_timeout_micros`` and a thread is free;
- ``num_batch_threads`` threads serve all queues;
- a batch is padded to the next ``allowed_batch_sizes`` entry by repeating its first row;
  the padding's outputs are dropped;
- a task whose caller gave up while it waited (``servable.CALLER_WAITS``: a cancelled gRPC
  call, a closed REST connection) is answered CANCELLED when its batch forms, and the batch
  runs without it (nor padding in its place); a batch of such tasks only does not run;
- with ``pad_variable_length_inputs``, inputs whose non-batch dimensions differ between
  tasks are padded to the largest (with the tensor's first element, as TF Serving does).
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Sequence

import numpy as np

from sagemaker_tfs.model_server.errors import Code, ServingError, invalid_argument, unavailable
from sagemaker_tfs.model_server.monitoring import METRICS
from sagemaker_tfs.model_server.serving.batching_parameters import BatchingParameters
from sagemaker_tfs.model_server.serving.servable import CALLER_GONE, CALLER_WAITS, RunFunction
from sagemaker_tfs.wire.errors import BATCH_QUEUE_FULL

logger = logging.getLogger(__name__)

QUEUE_FULL = BATCH_QUEUE_FULL


# ----- merging and splitting -----


def task_size(values: Sequence[np.ndarray]) -> int:
    """The 0th dimension shared by all inputs of a task."""
    sizes = set()
    for value in values:
        if value.ndim == 0:
            raise invalid_argument(
                "Batching session Run() input tensors must have at least one dimension"
            )
        sizes.add(value.shape[0])
    if len(sizes) != 1:
        raise invalid_argument(
            "Batching session Run() input tensors must have equal 0th-dimension size"
        )
    return sizes.pop()


def _pad_to(value: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    widths = [(0, target - size) for size, target in zip(value.shape, shape, strict=True)]
    if not any(after for _, after in widths):
        return value
    fill = value.flat[0] if value.size else 0
    if value.dtype == object:
        result = np.full(shape, fill, dtype=object)
        result[tuple(slice(0, size) for size in value.shape)] = value
        return result
    return np.pad(value, widths, mode="constant", constant_values=fill)


def merge_input(parts: list[np.ndarray], pad_variable: bool, index: int) -> np.ndarray:
    """Concatenate one input across tasks along the batch dimension."""
    inner_shapes = {part.shape[1:] for part in parts}
    if len(inner_shapes) > 1:
        ranks = {len(shape) for shape in inner_shapes}
        if not pad_variable or len(ranks) > 1:
            raise invalid_argument(
                f"Tensors with name 'input {index}' from different tasks have different "
                "shapes and padding is turned off. Set pad_variable_length_inputs to true, or "
                "ensure that all tensors with the same name have equal dimensions starting "
                "with the first dim."
            )
        inner = tuple(max(sizes) for sizes in zip(*inner_shapes, strict=True))
        parts = [_pad_to(part, (part.shape[0], *inner)) for part in parts]
    return np.concatenate(parts, axis=0)


def pad_batch(merged: np.ndarray, padded_size: int) -> np.ndarray:
    """Grow the batch to ``padded_size`` rows by repeating its first row."""
    missing = padded_size - merged.shape[0]
    if missing <= 0:
        return merged
    filler = np.repeat(merged[:1], missing, axis=0)
    return np.concatenate([merged, filler], axis=0)


def split_output(output: np.ndarray, sizes: list[int], padded_size: int) -> list[np.ndarray]:
    if output.ndim == 0 or output.shape[0] != padded_size:
        raise ServingError(
            Code.FAILED_PRECONDITION,
            "Batched output tensor's 0th dimension does not equal the sum of the 0th "
            "dimension sizes of the input tensors",
        )
    boundaries = np.cumsum(sizes)[:-1]
    return np.split(output[: sum(sizes)], boundaries, axis=0)


# ----- the scheduler -----


class _Task:
    __slots__ = ("values", "size", "done", "outputs", "error", "enqueued", "waits")

    def __init__(self, values: Sequence[np.ndarray], size: int) -> None:
        self.values = list(values)
        self.size = size
        self.waits = CALLER_WAITS.get()
        self.enqueued = time.monotonic()
        self.done = threading.Event()
        self.outputs: list[np.ndarray] | None = None
        self.error: ServingError | None = None


class _Batch:
    __slots__ = ("tasks", "size", "created")

    def __init__(self) -> None:
        self.tasks: list[_Task] = []
        self.size = 0
        self.created = time.monotonic()


class _Queue:
    def __init__(self, key: tuple, runner: RunFunction) -> None:
        self.key = key
        self.runner = runner
        self.batches: collections.deque[_Batch] = collections.deque()


class BatchScheduler:
    """One scheduler for the whole process: per-key queues, shared batch threads."""

    def __init__(self, parameters: BatchingParameters) -> None:
        self.parameters = parameters
        self._timeout = parameters.batch_timeout_micros / 1e6
        self._queues: dict[tuple, _Queue] = {}
        self._order: collections.deque[tuple] = collections.deque()
        self._condition = threading.Condition()
        self._stopping = False
        self.batches_run = 0
        self.tasks_run = 0
        self._threads = [
            threading.Thread(target=self._work, name=f"batch-{index}", daemon=True)
            for index in range(parameters.num_batch_threads)
        ]
        for thread in self._threads:
            thread.start()

    def submit(
        self, key: tuple, values: Sequence[np.ndarray], runner: RunFunction
    ) -> list[np.ndarray]:
        """Enqueue a task and block until its batch ran; returns this task's outputs."""
        size = task_size(values)
        limit = self.parameters.max_batch_size
        if size > limit:
            raise invalid_argument(f"Task size {size} is larger than maximum batch size {limit}")
        task = _Task(values, size)
        with self._condition:
            queue = self._queues.get(key)
            if queue is None:
                queue = self._queues[key] = _Queue(key, runner)
                self._order.append(key)
            self._enqueue(queue, task)
            self._condition.notify()
        task.done.wait()
        if task.error is not None:
            raise task.error
        assert task.outputs is not None
        return task.outputs

    def _enqueue(self, queue: _Queue, task: _Task) -> None:
        open_batch = queue.batches[-1] if queue.batches else None
        if open_batch is None or open_batch.size + task.size > self.parameters.max_batch_size:
            if len(queue.batches) >= self.parameters.max_enqueued_batches:
                raise unavailable(QUEUE_FULL)
            open_batch = _Batch()
            queue.batches.append(open_batch)
        open_batch.tasks.append(task)
        open_batch.size += task.size

    def shutdown(self) -> None:
        with self._condition:
            self._stopping = True
            self._condition.notify_all()

    def _ready_batch(self) -> tuple[_Queue | None, _Batch | None, float | None]:
        """The next batch to run (round-robin over queues), else the earliest deadline."""
        now = time.monotonic()
        earliest: float | None = None
        for _ in range(len(self._order)):
            key = self._order[0]
            self._order.rotate(-1)
            queue = self._queues[key]
            if not queue.batches:
                continue
            batch = queue.batches[0]
            closed = len(queue.batches) > 1
            full = batch.size >= self.parameters.max_batch_size
            deadline = batch.created + self._timeout
            if closed or full or deadline <= now:
                queue.batches.popleft()
                if not queue.batches:  # made again by the next task: requests choose keys
                    del self._queues[key]  # (their inputs and output filters), so that
                    self._order.pop()  # queues of past keys do not pile up (rotated last)
                return queue, batch, None
            earliest = deadline if earliest is None else min(earliest, deadline)
        return None, None, earliest

    def _work(self) -> None:
        while True:
            with self._condition:
                while True:
                    if self._stopping:
                        return
                    queue, batch, deadline = self._ready_batch()
                    if batch is not None:
                        break
                    wait = None if deadline is None else max(0.0, deadline - time.monotonic())
                    self._condition.wait(wait)
            assert queue is not None
            self._run(queue, batch)

    def _padded_size(self, size: int) -> int:
        for allowed in self.parameters.allowed_batch_sizes:
            if allowed >= size:
                return allowed
        return size

    def _run(self, queue: _Queue, batch: _Batch) -> None:
        if not _drop_gone_callers(batch):
            return
        sizes = [task.size for task in batch.tasks]
        padded_size = self._padded_size(batch.size)
        started = time.monotonic()
        METRICS.record_batch(sizes, [started - task.enqueued for task in batch.tasks], padded_size)
        try:
            merged = [
                pad_batch(
                    merge_input(
                        [task.values[index] for task in batch.tasks],
                        self.parameters.pad_variable_length_inputs,
                        index,
                    ),
                    padded_size,
                )
                for index in range(len(batch.tasks[0].values))
            ]
            outputs = _run_runner(queue.runner, merged)
            per_output = [split_output(output, sizes, padded_size) for output in outputs]
        except ServingError as error:
            for task in batch.tasks:
                task.error = error
                task.done.set()
            return
        with self._condition:
            self.batches_run += 1
            self.tasks_run += len(batch.tasks)
        logger.debug(
            "Ran batch: tasks=%d size=%d padded=%d key=%s",
            len(batch.tasks),
            batch.size,
            padded_size,
            queue.key[:3],
        )
        for index, task in enumerate(batch.tasks):
            task.outputs = [pieces[index] for pieces in per_output]
            task.done.set()


def _drop_gone_callers(batch: _Batch) -> bool:
    """Answer CANCELLED the tasks whose callers gave up and take them out of ``batch``;
    False when none is left. One ``waits()`` per task (gRPC's ``is_active``: a lock and two
    comparisons, about 0.3 us), on the batch thread, not under the scheduler's lock."""
    gone = [task for task in batch.tasks if task.waits is not None and not task.waits()]
    for task in gone:
        task.error = ServingError(Code.CANCELLED, CALLER_GONE)
        task.done.set()
        batch.tasks.remove(task)
        batch.size -= task.size
    return bool(batch.tasks)


def _run_runner(runner: RunFunction, merged: list[np.ndarray]) -> list[np.ndarray]:
    import tensorflow as tf  # already imported by the servable; local to keep this module light

    try:
        return runner(merged)
    except tf.errors.OpError as error:
        raise ServingError(Code(error.error_code), error.message) from None
    except Exception as error:  # noqa: BLE001 - the failure goes to every task of the batch
        raise ServingError(Code.INTERNAL, f"{type(error).__name__}: {error}") from None
