"""What the model server asks of a loaded model version, whatever format it was loaded from.

Two formats implement it: ``saved_model_servable.SavedModelServable`` (a SavedModel run in a
TF1 session, as TF Serving runs it) and ``tflite_servable.TfLiteServable`` (``model.tflite``
with ``--prefer_tflite_model``). The manager, the warm-up, and the REST and gRPC APIs see only
this protocol, so a third format is one new module, not a change to them.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Protocol, TypeAlias

import numpy as np

from sagemaker_tfs.model_server.errors import Code, ServingError

if TYPE_CHECKING:
    from tensorflow_serving.apis import (
        classification_pb2,
        get_model_metadata_pb2,
        regression_pb2,
    )

    from sagemaker_tfs.model_server.serving.classify_regress import Examples
    from sagemaker_tfs.model_server.serving.signatures import ServableSignature
    from sagemaker_tfs.model_server.serving.string_outputs import JoinedStrings

    # A tensor in or out of a run: an array of any shape and dtype, spelled without numpy's
    # default type arguments (Any) so that the module passes mypy's disallow_any_explicit.
    Tensor: TypeAlias = np.ndarray[tuple[int, ...], np.dtype[np.generic[object]]]

# A batch run: the merged inputs in, the outputs out (a string: ``Tensor`` is for mypy only).
RunFunction: TypeAlias = "Callable[[Sequence[Tensor]], list[Tensor]]"


# Whether the caller of this thread's run still waits for its answer (a gRPC call neither
# cancelled nor past its deadline, a REST connection not closed): set by the front ends around
# a call, read where a run starts (``check_caller_waits``) or its batch forms (the scheduler).
CALLER_WAITS: ContextVar[Callable[[], bool] | None] = ContextVar("caller_waits", default=None)
CALLER_GONE = "The call was cancelled before its run started"


def check_caller_waits() -> None:
    """CANCELLED when this run's caller gave up: its run would be work nobody reads."""
    waits = CALLER_WAITS.get()
    if waits is not None and not waits():
        raise ServingError(Code.CANCELLED, CALLER_GONE)


class BatchSubmitter(Protocol):
    """What a servable needs from the batch scheduler (implemented in ``batch_scheduler``)."""

    def submit(self, key: tuple, values: Sequence[Tensor], runner: RunFunction) -> list[Tensor]:
        """Run ``runner`` on ``values`` merged with other tasks of ``key``; this task's part."""
        ...


class BatchedRuns:
    """A servable's batcher (``--enable_batching``), which its runs go through, or None."""

    _batcher: BatchSubmitter | None = None

    @property
    def batched(self) -> bool:
        return self._batcher is not None

    def set_batcher(self, batcher: BatchSubmitter | None) -> None:
        """Route every run through ``batcher`` (see ``batch_scheduler.BatchScheduler``)."""
        self._batcher = batcher


class Servable(Protocol):
    """A loaded version: its name and number, its signatures, its three methods, the batcher
    its runs go through, and ``close`` (refuse new runs, finish those in flight)."""

    name: str
    version: int

    def signature(self, name: str) -> ServableSignature: ...

    def signature_def_map(self) -> get_model_metadata_pb2.SignatureDefMap: ...

    @property
    def batched(self) -> bool: ...

    def set_batcher(self, batcher: BatchSubmitter | None) -> None: ...

    def close(self, drain_timeout: float = 30.0) -> None: ...

    def predict(
        self,
        signature_name: str,
        inputs: dict[str, Tensor],
        output_filter: Sequence[str] = (),
    ) -> dict[str, Tensor]: ...

    def predict_joined(
        self, signature_name: str, inputs: dict[str, Tensor]
    ) -> dict[str, Tensor | JoinedStrings]:
        """``predict`` for a REST answer: a string output may come as a ``JoinedStrings``
        (``string_outputs``), sliced into arrays a block at a time."""
        ...

    def classify(
        self, signature_name: str, request_input: Examples
    ) -> classification_pb2.ClassificationResult: ...

    def regress(
        self, signature_name: str, request_input: Examples
    ) -> regression_pb2.RegressionResult: ...

    def classify_arrays(
        self, signature_name: str, request_input: Examples
    ) -> tuple[Tensor | None, Tensor | None]:
        """``classify``'s outputs as checked arrays (``Classified``: classes, scores), not a
        result proto (for REST)."""
        ...

    def regress_values(self, signature_name: str, request_input: Examples) -> Tensor:
        """``regress``'s values as a checked array, not a result proto (for REST)."""
        ...


# Graphs whose lone runs take less than this go inline even beside other runs.
SHORT_RUN_SECONDS = 0.001


class SessionRunner:
    """One signature's callables: ``pooled`` runs in TF's inter-op pool, ``inline`` (when
    there is one) in the caller's thread.

    A run alone goes inline and its time is noted; once lone runs take less than
    ``SHORT_RUN_SECONDS``, overlapping runs go inline too, since nothing that small can crowd
    the cores. Wall time, not the caller thread's CPU: an op TensorFlow spreads over its
    intra-op threads costs the caller little CPU while it crowds the cores all the same, and
    a lone run slowed by other work only sends the graph to the pool, the safe side."""

    def __init__(self, pooled: RunFunction, inline: RunFunction | None) -> None:
        self.pooled = pooled
        self.inline = inline
        self.seconds = math.inf  # a lone inline run's, smoothed

    def __call__(self, values: Sequence[Tensor]) -> list[Tensor]:
        """A batch of the batch scheduler's: merged batches always run in the pool."""
        return self.pooled(values)

    def run(self, values: Sequence[Tensor], alone: bool) -> list[Tensor]:
        if self.inline is None:
            return self.pooled(values)
        if not alone:
            short = self.seconds < SHORT_RUN_SECONDS
            return self.inline(values) if short else self.pooled(values)
        started = time.perf_counter()
        results = self.inline(values)
        spent = time.perf_counter() - started
        previous = self.seconds
        self.seconds = spent if previous == math.inf else previous + (spent - previous) / 8
        return results
