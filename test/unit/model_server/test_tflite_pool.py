"""A TFLite version's pools: a batch larger than one interpreter's share is cut into parts run
on the pool's interpreters and joined again, exactly as one interpreter would answer; what
cannot be cut (inputs of different lengths) runs whole, and a scalar output of a cut batch is
TF Serving's error. The model is converted here by TensorFlow's converter."""

from __future__ import annotations

import concurrent.futures
import warnings

import numpy as np
import pytest
import tensorflow as tf
from sagemaker_tfs.model_server.errors import Code, ServingError
from sagemaker_tfs.model_server.serving.tflite_servable import TfLiteServable, rows_per_interpreter


class _RowsAndTotal(tf.Module):
    @tf.function(
        input_signature=[
            tf.TensorSpec([None, 2], tf.float32, name="a"),
            tf.TensorSpec([None], tf.float32, name="b"),
        ]
    )
    def rows(self, a: tf.Tensor, b: tf.Tensor) -> dict:
        return {"rows": a[:, 0] * b + a[:, 1]}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="b")])
    def total(self, b: tf.Tensor) -> dict:
        return {"total": tf.reduce_sum(b)}


def _converted(function: tf.types.experimental.ConcreteFunction, module: tf.Module) -> bytes:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tf.lite.TFLiteConverter.from_concrete_functions([function], module).convert()


@pytest.fixture(scope="module")
def models() -> dict[str, bytes]:
    module = _RowsAndTotal()
    return {
        "rows": _converted(module.rows.get_concrete_function(), module),
        "total": _converted(module.total.get_concrete_function(), module),
    }


def _inputs(servable: TfLiteServable, **arrays: np.ndarray) -> dict[str, np.ndarray]:
    """The arrays keyed by the generated signature's tensor names (``serving_default_a:0``)."""
    signature = servable.signature("")
    return {name: arrays[name.removeprefix("serving_default_")[:-2]] for name in signature.inputs}


def test_split_size_is_tf_servings() -> None:
    assert [rows_per_interpreter(n) for n in (1, 2, 3, 4, 1000)] == [500, 250, 167, 125, 1]


def test_a_cut_batch_answers_as_one_interpreter(models: dict[str, bytes]) -> None:
    whole = TfLiteServable("m", 1, models["rows"], pools=1, interpreters_per_pool=1)
    shared = TfLiteServable("m", 1, models["rows"], pools=2, interpreters_per_pool=3)
    rng = np.random.default_rng(7)
    for rows in (1, 167, 168, 1001):
        a = rng.standard_normal((rows, 2)).astype(np.float32)
        b = rng.standard_normal(rows).astype(np.float32)
        expected = whole.predict("", _inputs(whole, a=a, b=b))
        [(name, values)] = expected.items()
        np.testing.assert_array_equal(values, a[:, 0] * b + a[:, 1])
        feeds = _inputs(shared, a=a, b=b)
        with concurrent.futures.ThreadPoolExecutor(3) as calls:
            answers = [calls.submit(shared.predict, "", feeds) for _ in range(3)]
        for answer in answers:
            np.testing.assert_array_equal(answer.result()[name], values)


def test_inputs_of_different_lengths_run_whole(models: dict[str, bytes]) -> None:
    shared = TfLiteServable("m", 1, models["rows"], pools=1, interpreters_per_pool=2)
    a, b = np.ones((600, 2), np.float32), np.ones(1, np.float32)  # b broadcasts over a's rows
    [answer] = shared.predict("", _inputs(shared, a=a, b=b)).values()
    np.testing.assert_array_equal(answer, np.full(600, 2.0, np.float32))


def test_a_scalar_output_of_a_cut_batch_is_an_error(models: dict[str, bytes]) -> None:
    whole = TfLiteServable("m", 1, models["total"], pools=1, interpreters_per_pool=1)
    shared = TfLiteServable("m", 1, models["total"], pools=1, interpreters_per_pool=2)
    small, large = np.ones(250, np.float32), np.ones(251, np.float32)
    assert list(shared.predict("", _inputs(shared, b=small)).values())[0] == 250.0
    assert list(whole.predict("", _inputs(whole, b=large)).values())[0] == 251.0
    with pytest.raises(ServingError) as caught:
        shared.predict("", _inputs(shared, b=large))
    assert caught.value.code == Code.FAILED_PRECONDITION
    assert caught.value.message == "Batched output tensor has 0 dimensions"
