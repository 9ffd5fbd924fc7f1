"""Pixels widened to float inputs, and the gRPC metadata that asks a model server for it."""

from __future__ import annotations

import numpy as np
import pytest
from sagemaker_tfs.wire import pixels
from sagemaker_tfs.wire.pixels import PixelCast

IMAGE = np.arange(256, dtype=np.uint8).reshape(1, 16, 16, 1)


@pytest.mark.parametrize(
    ("cast", "expected"),
    [
        (PixelCast("float32"), IMAGE.astype(np.float32)),
        (PixelCast("float64", scale=0.5), IMAGE.astype(np.float32) * np.float32(0.5)),
        (
            PixelCast("float16", scale=2 / 255, offset=-1),
            (IMAGE.astype(np.float32) * np.float32(2 / 255) - 1).astype(np.float16),
        ),
    ],
)
def test_apply_widens_in_float32_then_converts(cast: PixelCast, expected: np.ndarray) -> None:
    widened = cast.apply(IMAGE)
    assert widened.dtype == np.dtype(cast.dtype)
    np.testing.assert_array_equal(widened, expected.astype(cast.dtype))


def test_mobilenet_scaling_spans_minus_one_to_one() -> None:
    widened = PixelCast("float32", scale=2 / 255, offset=-1).apply(IMAGE)
    assert widened.min() == -1.0
    assert abs(widened.max() - 1.0) < 1e-6


@pytest.mark.parametrize("dtype", ["int32", "uint8", "string", "bool", "no_such_type"])
def test_only_float_types_are_widened_to(dtype: str) -> None:
    with pytest.raises(ValueError, match="float type"):
        PixelCast(dtype)


def test_non_finite_scaling_and_non_integer_pixels_are_refused() -> None:
    with pytest.raises(ValueError, match="finite"):
        PixelCast("float32", scale=float("nan"))
    with pytest.raises(ValueError, match="must be integers"):
        PixelCast("float32").apply(IMAGE.astype(np.float32))


def test_widen_converts_only_the_named_inputs() -> None:
    other = np.ones(3, np.int64)
    widened = pixels.widen({"image": IMAGE, "other": other}, {"image": PixelCast("float32")})
    assert widened["image"].dtype == np.float32
    assert widened["other"] is other
    assert pixels.widened_bytes({"image": IMAGE, "other": other}, {"image": PixelCast("float32")})
    assert pixels.widened_bytes({"image": IMAGE}, {"image": PixelCast("float64")}) == 256 * 8
    with pytest.raises(ValueError, match="not sent: missing"):
        pixels.widen({"image": IMAGE}, {"missing": PixelCast("float32")})


def test_metadata_round_trip() -> None:
    casts = {"a": PixelCast("float32"), "b": PixelCast("float16", 0.00784313725, -1.0)}
    assert pixels.from_metadata(pixels.to_metadata(casts)) == casts
    assert pixels.to_metadata({}) == ()
    assert pixels.from_metadata([("other", "x")]) == {}
    assert pixels.from_metadata(None) == {}


@pytest.mark.parametrize(
    "value",
    ["", "{", "[]", '{"a": "float32"}', '{"a": ["float32", 1]}', '{"a": ["int8", 1, 0]}',
     '{"a": ["float32", "x", 0]}', '{"a": ["float32", 1e999, 0]}'],
)  # fmt: skip
def test_unreadable_metadata_is_a_value_error(value: str) -> None:
    with pytest.raises(ValueError, match=pixels.METADATA_KEY):
        pixels.from_metadata([(pixels.METADATA_KEY, value)])
