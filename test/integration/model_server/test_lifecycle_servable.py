"""Servable unloading in-process (a real TF session): requests in flight finish first; the
session callables kept per version are bounded."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from sagemaker_tfs.model_server.errors import Code, ServingError
from sagemaker_tfs.model_server.serving import saved_model_servable as servable_module
from sagemaker_tfs.model_server.serving.saved_model_servable import SavedModelServable


class _SlowBatcher:
    """Holds each run until released, so a close() can be issued while it is in flight."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def submit(self, key, values, runner):  # type: ignore[no-untyped-def]
        self.entered.set()
        self.release.wait(10)
        return runner(values)


ONE_THREAD = tf.compat.v1.ConfigProto(
    intra_op_parallelism_threads=1, inter_op_parallelism_threads=1, allow_soft_placement=True
)


def test_close_waits_for_runs_in_flight_and_refuses_new_ones(testdata_dir: Path) -> None:
    path = testdata_dir / "saved_model_half_plus_three" / "00000123"
    servable = SavedModelServable.load("h3", 123, str(path), ONE_THREAD)
    batcher = _SlowBatcher()
    servable.set_batcher(batcher)
    results: list[np.ndarray] = []
    request = threading.Thread(
        target=lambda: results.append(
            servable.predict("", {"x": np.array([1.0], dtype=np.float32)})["y"]
        )
    )
    request.start()
    assert batcher.entered.wait(10)
    closer = threading.Thread(target=servable.close)
    closer.start()
    closer.join(0.3)
    assert closer.is_alive()  # still waiting for the request in flight
    with pytest.raises(ServingError) as caught:
        servable.predict("", {"x": np.array([1.0], dtype=np.float32)})
    assert caught.value.code == Code.UNAVAILABLE
    batcher.release.set()
    request.join(10)
    closer.join(10)
    assert not closer.is_alive()
    np.testing.assert_array_equal(results[0], [3.5])


def test_session_callables_are_bounded(testdata_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A callable per (signature, inputs, outputs) asked for: past MAX_CALLABLES the oldest
    goes (output filters are the client's choice), and a dropped one is made again."""
    monkeypatch.setattr(servable_module, "MAX_CALLABLES", 2)
    path = testdata_dir / "saved_model_half_plus_three" / "00000123"
    servable = SavedModelServable.load("h3", 123, str(path), ONE_THREAD)
    signature = servable.signature("")
    for outputs in (("y",), ("y", "y"), ("y", "y", "y")):
        servable._callable(signature, ("x",), outputs)
    assert list(servable._callables) == [
        ("serving_default", ("x",), ("y", "y")),
        ("serving_default", ("x",), ("y", "y", "y")),
    ]
    answer = servable.predict("", {"x": np.array([1.0], dtype=np.float32)})
    np.testing.assert_array_equal(answer["y"], [3.5])
    assert len(servable._callables) == 2
    servable.close()
