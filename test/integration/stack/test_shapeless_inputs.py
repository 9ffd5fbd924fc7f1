"""Inputs whose SignatureDef records no shape take any shape, on every binary path.

TF Serving's own TF1 test model ``saved_model_half_plus_three`` has TensorInfos with no
``tensor_shape`` at all; the generated ``shapes`` model has one input of each kind a TF1
SignatureDef can record: ``unknown_rank`` (any shape), ``[]`` (a true scalar) and ``[-1, 2]``
(an unknown batch dimension). TF Serving feeds every input whatever shape it is given and
the graph decides; the service must not read them as scalars nor check their shapes.
Whole stack: nginx -> service -> gRPC -> model server.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import numpy as np
import pytest
import requests
from payload_bytes import npy_bytes, npz_bytes, png_of
from whole_stack import RunningStack, running_stack

pytestmark = pytest.mark.slow
NPY, NPZ = "application/x-npy", "application/x-npz"


@pytest.fixture(scope="module")
def stack(
    testdata_dir, test_models, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningStack]:
    model_dir = tmp_path_factory.mktemp("shapeless_models")
    tfs_model = testdata_dir / "saved_model_half_plus_three"
    (model_dir / "half_plus_three").symlink_to(tfs_model, target_is_directory=True)
    (model_dir / "shapes").symlink_to(test_models("shapes"), target_is_directory=True)
    with running_stack(model_dir, tmp_path_factory.mktemp("shapeless_work")) as running:
        yield running


def invoke(
    stack: RunningStack, body: bytes, content_type: str, accept: str, attributes: str
) -> requests.Response:
    return stack.post(
        body, content_type, Accept=accept, **{"X-Amzn-SageMaker-Custom-Attributes": attributes}
    )


def as_array(response: requests.Response) -> np.ndarray:
    assert response.status_code == 200, response.text
    return np.load(io.BytesIO(response.content), allow_pickle=False)


HALF_PLUS_THREE = "tfs-model-name=half_plus_three"


@pytest.mark.parametrize(
    "shape", [(3,), (2, 2), (), (1, 2, 3)], ids=["vector", "matrix", "scalar", "rank3"]
)
def test_npy_of_any_shape_to_an_input_with_no_recorded_shape(stack, shape) -> None:
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    served = as_array(invoke(stack, npy_bytes(x), NPY, NPY, HALF_PLUS_THREE))
    assert served.shape == shape
    np.testing.assert_allclose(served, x * 0.5 + 3)


def test_npz_json_and_csv_with_a_binary_accept(stack) -> None:
    x = np.array([[1.0, 2.0], [5.0, 6.0]], np.float32)
    expected = x * 0.5 + 3
    from_npz = invoke(stack, npz_bytes(x=x), NPZ, NPZ, HALF_PLUS_THREE)
    assert from_npz.status_code == 200, from_npz.text
    with np.load(io.BytesIO(from_npz.content), allow_pickle=False) as archive:
        np.testing.assert_allclose(archive["y"], expected)
    body = json.dumps({"instances": x.tolist()}).encode()
    np.testing.assert_allclose(
        as_array(invoke(stack, body, "application/json", NPY, HALF_PLUS_THREE)), expected
    )
    csv = b"1.0,2.0\n5.0,6.0\n"
    np.testing.assert_allclose(
        as_array(invoke(stack, csv, "text/csv", NPY, HALF_PLUS_THREE)), expected
    )


def test_image_keeps_its_own_size_for_an_input_with_no_recorded_shape(stack) -> None:
    pixels = np.random.default_rng(7).integers(0, 255, (5, 4, 3), dtype=np.uint8)
    served = as_array(invoke(stack, png_of(pixels), "image/png", NPY, HALF_PLUS_THREE))
    assert served.shape == (1, 5, 4, 3)
    np.testing.assert_allclose(served[0], pixels.astype(np.float32) * 0.5 + 3)


SHAPES = "tfs-model-name=shapes"
ROWS = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], np.float32)
SCALAR = np.array(2.0, np.float32)


def shapes(stack: RunningStack, **arrays: np.ndarray) -> requests.Response:
    return invoke(stack, npz_bytes(**arrays), NPZ, NPZ, SHAPES)


@pytest.mark.parametrize("shape", [(4,), (2, 3), (2, 1, 2), ()])
def test_unknown_rank_input_takes_any_shape(stack, shape) -> None:
    x = np.ones(shape, np.float32)
    response = shapes(stack, any=x, scale=SCALAR, rows=ROWS)
    assert response.status_code == 200, response.text
    with np.load(io.BytesIO(response.content), allow_pickle=False) as archive:
        assert archive["doubled"].shape == shape
        np.testing.assert_allclose(archive["doubled"], x * 2)
        np.testing.assert_allclose(archive["scaled"], ROWS * 2)


def test_recorded_shapes_are_left_to_the_model_as_tf_serving_leaves_them(stack) -> None:
    """TF Serving's Predict does not compare a tensor's shape with the signature's: a ``[1]``
    for the scalar ``scale`` and a ``[3, 3]`` for ``rows`` (``[-1, 2]``) broadcast in the
    graph; shapes the graph cannot take are the model server's 400."""
    any_ = np.ones(3, np.float32)
    rows = np.arange(9, dtype=np.float32).reshape(3, 3)
    response = shapes(stack, any=any_, scale=np.array([2.0], np.float32), rows=rows)
    assert response.status_code == 200, response.text
    with np.load(io.BytesIO(response.content), allow_pickle=False) as archive:
        np.testing.assert_allclose(archive["scaled"], rows * 2)
    broken = shapes(stack, any=any_, scale=np.array([2.0, 3.0], np.float32), rows=rows)
    assert broken.status_code == 400, broken.text
    assert "Incompatible shapes" in broken.json()["error"]
