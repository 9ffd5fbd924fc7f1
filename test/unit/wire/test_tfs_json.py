"""wire/tfs_json: TF Serving's float text by its literal rule, and Predict's answer in pieces.

The float rule as TF Serving states it (``%.6g``; if that does not read back as the value,
``%.9g`` for a float or ``%.17g`` for a double; ``.0`` when the text has neither ``.`` nor
``e``) is written here one value at a time; ``format_floats`` decides most of it with NumPy
and prints in one ``%``, and must give the same text for every value. The answer written in
pieces of a few elements must be the answer written whole (whose layout test_predict_json.py
checks byte for byte).
"""

from __future__ import annotations

import numpy as np
import pytest
from sagemaker_tfs.wire import float_texts, tfs_json


def literal_text(value: float, is_double: bool) -> str:
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    cast = np.float64 if is_double else np.float32
    text = f"{value:.6g}"
    if cast(float(text)) != cast(value):
        text = f"{value:.17g}" if is_double else f"{value:.9g}"
    return text if "." in text or "e" in text else text + ".0"


def special_values(dtype: type) -> np.ndarray:
    info = np.finfo(dtype)
    powers = np.array([10.0**k for k in range(-40, 39)], dtype)
    edges = [0.0, -0.0, 1.0, 1e6, 999999.5, 100000.5, 1234565, 16777216, 0.1, 1e-5]
    edges += [float(info.tiny), float(info.max), float(info.smallest_subnormal)]
    edges += [np.nan, np.inf, -np.inf]
    return np.concatenate(
        [np.array(edges, dtype), powers, np.nextafter(powers, dtype(np.inf)),
         np.nextafter(powers, dtype(-np.inf))]  # fmt: skip
    )


def random_values(dtype: type, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    count = 20_000
    bits = rng.integers(0, 2**63, count, dtype=np.uint64)
    raw = bits.astype(np.uint32).view(np.float32) if dtype == np.float32 else bits.view(np.float64)
    scattered = rng.standard_normal(count) * 10.0 ** rng.integers(-40, 39, count)
    short_decimals = np.round(rng.standard_normal(count) * 1e7) / 10.0 ** rng.integers(0, 8, count)
    eighths = np.arange(-count, count) / 8
    with np.errstate(over="ignore"):
        return np.concatenate([raw, scattered, short_decimals, eighths]).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("seed", range(3))
def test_float_text_follows_the_literal_rule(dtype: type, seed: int) -> None:
    values = np.concatenate([special_values(dtype), random_values(dtype, seed)])
    expected = [literal_text(value, dtype == np.float64) for value in values.tolist()]
    assert tfs_json.format_floats(values) == expected


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_a_few_values_printed_one_by_one_follow_the_same_rule(dtype: type) -> None:
    with np.errstate(over="ignore"):
        values = np.concatenate([special_values(np.float64), random_values(np.float64, 5)[:4000]])
        values = values.astype(dtype)
    is_double = dtype == np.float64
    for start in range(0, values.size, tfs_json.FEW_FLOATS):
        few = values[start : start + tfs_json.FEW_FLOATS]
        expected = [literal_text(value, is_double) for value in few.tolist()]
        assert tfs_json.format_floats(few) == expected
        assert tfs_json.joined_floats(few) == ", ".join(expected)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_a_vector_joined_in_one_print_is_its_texts_joined(dtype: type) -> None:
    values = np.concatenate([special_values(np.float64), random_values(np.float64, 4)])
    with np.errstate(over="ignore"):
        vector = values.astype(dtype)
    expected = ", ".join(literal_text(value, dtype == np.float64) for value in vector.tolist())
    assert tfs_json.joined_floats(vector) == expected
    assert tfs_json.joined_floats(vector[:1]) == expected.split(", ")[0]
    assert tfs_json.joined_floats(vector[:0]) == ""


@pytest.mark.parametrize("precision", [6, 9])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_rounding_is_decided_for_most_values_and_rightly(dtype: type, precision: int) -> None:
    typical = np.random.default_rng(3).standard_normal(50_000).astype(dtype) * dtype(1000)
    magnitude = np.abs(typical.astype(np.float64))
    of_floats = dtype == np.float32  # a float's ties are exact: rounded to even
    assert float_texts.rounded_digits(magnitude, precision, of_floats)[2].mean() > 0.999
    values = random_values(dtype, 9)
    magnitude = np.abs(values[np.isfinite(values) & (values != 0)].astype(np.float64))
    digits, exponent, certain = float_texts.rounded_digits(magnitude, precision, of_floats)
    triples = zip(magnitude[certain].tolist(), digits[certain].tolist(),
                  exponent[certain].tolist(), strict=True)  # fmt: skip
    for value, rounded, power in triples:  # a double's ties (x.5 at the last digit): not certain
        mantissa, written_power = f"{value:.{precision - 1}e}".split("e")
        assert (int(rounded), power) == (int(mantissa.replace(".", "")), int(written_power))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_most_values_are_laid_out_by_numpy_not_printed_one_by_one(
    dtype: type, monkeypatch: pytest.MonkeyPatch
) -> None:
    printed = []
    original = float_texts.printed_texts
    monkeypatch.setattr(
        float_texts, "printed_texts", lambda values: printed.append(values.size) or original(values)
    )
    typical = np.random.default_rng(4).uniform(-1e4, 1e4, 50_000).astype(dtype)
    expected = ", ".join(literal_text(value, dtype == np.float64) for value in typical.tolist())
    assert tfs_json.joined_floats(typical) == expected
    assert sum(printed) < 50


def outputs_cases() -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(1)
    strings = np.array([b'a\n"b', "\u00e9".encode(), b"\xff", b""] * 6, dtype=object)
    return [
        {"y": rng.standard_normal(7).astype(np.float32)},
        {"y": rng.standard_normal((5, 3)).astype(np.float32)},
        {"y": rng.standard_normal((3, 2, 2))},
        {"y": np.zeros((0, 3), np.float32)},
        {"y": np.arange(6, dtype=np.int64).reshape(3, 2), "z": np.array([True, False, True])},
        {"s_bytes": strings[:6].reshape(3, 2), "t": strings[6:9], "n": np.arange(3.0)},
        {"y": np.float32(2.5)},
    ]


@pytest.mark.parametrize("outputs", outputs_cases())
@pytest.mark.parametrize("columnar", [False, True])
def test_an_answer_in_pieces_is_the_answer_whole(
    outputs: dict[str, np.ndarray], columnar: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    def answer() -> bytes | str:
        try:
            return b"".join(tfs_json.predict_answer_pieces(outputs, columnar))
        except tfs_json.TensorJsonError as error:
            return str(error)

    whole = answer()
    for size in (1, 2, 5):
        monkeypatch.setattr(tfs_json, "PIECE_ELEMENTS", size)
        assert answer() == whole
        pieces = (
            list(tfs_json.predict_answer_pieces(outputs, columnar))
            if isinstance(whole, bytes)
            else []
        )
        assert all(isinstance(piece, bytes) for piece in pieces)


@pytest.mark.parametrize("shape", [(300, 1), (100, 3), (40, 2, 3), (7, 2, 3, 4), (3, 70)])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_rows_laid_out_with_their_brackets_are_the_rows_rendered_one_by_one(
    shape: tuple[int, ...], dtype: type
) -> None:
    values = np.concatenate([special_values(np.float64), random_values(np.float64, 7)])
    with np.errstate(over="ignore"):
        rows = values[: int(np.prod(shape))].astype(dtype).reshape(shape)
    expected = ", ".join(
        tfs_json._nest(
            [literal_text(value, dtype == np.float64) for value in row.reshape(-1).tolist()],
            row.shape, 1, True, False,
        )
        for row in rows
    )  # fmt: skip
    assert tfs_json._joined_row_bytes(rows).decode() == expected
    answer = b"".join(tfs_json.predict_answer_pieces({"y": rows}, False))
    assert answer == b'{\n    "predictions": [' + expected.encode() + b"\n    ]\n}"
