"""Small JSON bodies of numbers for one float input are read whole by orjson
(``text_tensors._small_floats``): each must give what the rest of the reader, and the REST path
in process, give (dtype, shape, bits, columnar), or be left to them (None)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from sagemaker_tfs.service.codecs.text import text_tensors
from sagemaker_tfs.wire import tensors
from sagemaker_tfs.wire.signatures import Signature, TensorSpec
from test_text_tensors import JSON, assert_same_as_rest, random_number, read

FLOATS = [tensors.tf_dtype(np.dtype(name)) for name in ("float16", "float32", "float64")]


def random_body(rng: random.Random) -> bytes:
    """Rectangular nested lists of numbers (an odd one ragged, empty or not a number), bare or
    under ``instances`` or ``inputs``, with JSON's whitespace here and there."""
    shape = [rng.randint(1, 4) for _ in range(rng.randint(1, 3))]

    def nested(level: int) -> str:
        if level == len(shape):
            return random_number(rng) if rng.random() > 0.02 else rng.choice(["true", "NaN", "[]"])
        items = [nested(level + 1) for _ in range(shape[level] - (rng.random() < 0.03))]
        return "[" + rng.choice([",", ", ", " ,\n"]).join(items) + "]"

    value = nested(0) if rng.random() > 0.05 else rng.choice(["[]", "[[]]", "5", "[1e400]"])
    key = rng.choice([None, "instances", "inputs"])
    return (value if key is None else f'{{"{key}": {value}}}').encode()


def full_reader(body: bytes, dtype: int, monkeypatch: pytest.MonkeyPatch) -> object:
    with monkeypatch.context() as patched:
        patched.setattr(text_tensors, "SMALL_BYTES", -1)
        return read(JSON, body, dtype)


@pytest.mark.parametrize("seed", range(8))
def test_small_bodies_are_read_as_the_reader_and_the_rest_path_read_them(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    small_read = 0
    for _ in range(150):
        body, dtype = random_body(rng), rng.choice(FLOATS)
        signature = Signature("serving_default", "", {"x": TensorSpec("x", dtype, None)}, {})
        small = text_tensors._small_floats(body, {"serving_default": signature})
        assert_same_as_rest(JSON, body, dtype)
        if small is None:
            continue
        small_read += 1
        full = full_reader(body, dtype, monkeypatch)
        assert isinstance(full, text_tensors.TextRequest), body
        assert small.columnar == full.columnar, body
        assert small.arrays["x"].dtype == full.arrays["x"].dtype, body
        assert small.arrays["x"].shape == full.arrays["x"].shape, body
        assert small.arrays["x"].tobytes() == full.arrays["x"].tobytes(), body
    assert small_read > 100
