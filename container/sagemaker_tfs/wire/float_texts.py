"""TF Serving's float text for a whole array at once, its characters placed by NumPy.

The rule (``wire/tfs_json``): ``%.6g``; if that does not read back as the value, ``%.9g``
(float) or ``%.17g`` (double); then ``.0`` when the text has neither ``.`` nor ``e``. Where the
rounding to 6 (or, for a float, 9) significant digits is certain (:func:`rounded_digits`),
each value's text is made from its digits and decimal exponent as ``%g`` lays them out (fixed
notation for exponents from -4 to the precision, trailing zeros of the fraction removed, else
``d.ddde+XX``), one character column at a time over all values, in a matrix of bytes whose
unused cells are then dropped (about twice as fast as one `%` over all values).

The values NumPy cannot decide so (ties too close to call, subnormals, exponents beyond an
exact power of ten, NaN and the infinities) are printed one by one in Python
(:func:`printed_texts`), and a double whose 6 digits do not read back is printed by ``%``
(17 digits do not fit a double's exact arithmetic); their texts are copied into their rows.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

import numpy as np

# A text's cells: the longest printed one ("-2.2250738585072014e-308"); the longest laid out
# here ("-1.23456789e+38", "-0.000123456789") fits in fewer.
_TEXT_CELLS = 24
_LAID_OUT_CELLS = 16
_EXACT_POWERS = 22  # 10**k is exact in a double for k <= 22
_POWERS = 10.0 ** np.arange(_EXACT_POWERS + 1)
_EXACT_FLOAT_PRODUCT = 12  # 24 bits times 5**12 (28 bits) fit a double's 53
_FOUR_DIGITS = np.array([list(b"%04d" % number) for number in range(10_000)], np.uint8)
_ZERO, _POINT, _MINUS, _PLUS, _E = (ord(c) for c in "0.-+e")


def joined_texts(values: np.ndarray, separator: bytes | list[bytes]) -> bytes:
    """Every element's text (``values`` flattened, float32 or float64), ``separator`` between;
    a list of separators is repeated: the one after element ``i`` is ``separator[i % len]``
    (``values`` then holds whole periods)."""
    separators = [separator] if isinstance(separator, bytes) else separator
    flat = np.ascontiguousarray(values).reshape(-1)
    if flat.dtype != np.float64:
        flat = flat.astype(np.float32)
    if flat.size == 0:
        return b""
    is_double = flat.dtype == np.float64
    magnitude = np.abs(flat.astype(np.float64))
    normal = np.isfinite(magnitude) & (magnitude >= np.finfo(flat.dtype).tiny)
    magnitude = np.where(normal, magnitude, 1.0)
    short, exponent, certain = rounded_digits(magnitude, 6, not is_double)
    certain &= normal
    with np.errstate(over="ignore"):
        back = _scaled(short, exponent - 5).astype(flat.dtype)
    reads_back = certain & (back == magnitude.astype(flat.dtype))
    nine, long = short * 1000, np.zeros(flat.size, bool)
    if not is_double:
        long_digits, long_exponent, long_certain = rounded_digits(magnitude, 9, True)
        long = certain & ~reads_back & long_certain
        nine = np.where(long, long_digits, nine)
        exponent = np.where(long, long_exponent, exponent)
    laid_out = reads_back | long
    group = _layout_groups(exponent, long)
    cells_per_text = _laid_out_cells(group) if laid_out.all() else _TEXT_CELLS
    # a text per column (each character position one contiguous row), transposed at the end
    separator_cells = _separator_cells(separators, flat.size)
    cells = np.empty((cells_per_text + separator_cells.shape[0], flat.size), np.uint8)
    cells[:cells_per_text] = 0
    cells[cells_per_text:] = separator_cells
    _lay_out(cells, nine.astype(np.int64), exponent, group, np.signbit(flat))
    if cells_per_text == _TEXT_CELLS:
        _copy_others(cells, flat, ~laid_out, certain & ~reads_back & is_double)
    cells[cells_per_text:, -1] = 0  # no separator after the last text
    return _texts_in_order(cells).translate(None, b"\0")


def _texts_in_order(cells: np.ndarray) -> bytes:
    """The matrix's columns one after another: a character position (a row) at a time into
    a text per row (long strided copies; NumPy's transposed copy goes a few cells at a time)."""
    texts = np.empty(cells.shape[::-1], np.uint8)
    for position, row in enumerate(cells):
        texts[:, position] = row
    return texts.tobytes()


def _separator_cells(separators: list[bytes], count: int) -> np.ndarray:
    """The separators' cells for ``count`` values (a column each, padded with zeros)."""
    width = max(len(separator) for separator in separators)
    period = np.zeros((width, len(separators)), np.uint8)
    for index, separator in enumerate(separators):
        period[: len(separator), index] = np.frombuffer(separator, np.uint8)
    if len(separators) == 1:
        return np.broadcast_to(period, (width, count))
    return np.tile(period, count // len(separators))


def _layout_groups(exponent: np.ndarray, long: np.ndarray) -> np.ndarray:
    """Each value's layout: ``exponent + 4`` for fixed notation (exponents -4 to the
    precision, ``%.9g``'s where ``long``, else ``%.6g``'s), 13 for scientific."""
    fixed = (exponent >= -4) & (exponent < np.where(long, 9, 6))
    return np.where(fixed, exponent + 4, 13)


def _laid_out_cells(group: np.ndarray) -> int:
    """The cells that the widest text of these layouts takes, its sign's included: nine
    digits and a point, ``.0`` after nine integral digits, ``0.000`` before nine digits."""
    low, high = int(group.min()), int(group.max())
    widest = 15 if high == 13 else max(11, 10 - (low - 4))
    return 1 + widest


def _lay_out(cells: np.ndarray, nine: np.ndarray, exponent: np.ndarray, group: np.ndarray,
             negative: np.ndarray) -> None:  # fmt: skip
    """The texts of values given as nine digits (an integer) and the exponent of the first,
    laid out as their ``group`` says (``_layout_groups``: a ``%.6g`` text's digits are
    followed by three zeros), into the first columns of ``cells`` (as many as the widest
    text takes): the values of one notation and exponent (most of an array: one or a few)
    laid out at once."""
    digits = np.empty((9, nine.size), np.uint8)  # a row per digit, as characters
    kept = np.empty((9, nine.size), bool)  # up to the last digit that is not 0
    rest, seen = nine.astype(np.int32), np.zeros(nine.size, bool)
    for index in range(8, -1, -1):
        higher = rest // 10  # a division by one number: NumPy's fast way
        digit = rest - higher * 10
        seen |= digit != 0
        digits[index], kept[index], rest = digit + _ZERO, seen, higher
    cells[0] = np.where(negative, _MINUS, 0)
    width = min(_LAID_OUT_CELLS, _laid_out_cells(group))
    counts = np.bincount(group)
    if counts.max() == group.size:  # one layout (values of one magnitude): no reordering
        cells[1:width] = _group_texts(int(group[0]), digits, kept, exponent)[: width - 1]
        return
    order = np.argsort(group, kind="stable")  # each layout's values side by side
    digits, kept, exponent = digits[:, order], kept[:, order], exponent[order]
    texts = np.empty((_LAID_OUT_CELLS - 1, group.size), np.uint8)
    start = 0
    for key in np.flatnonzero(counts).tolist():
        rows = slice(start, start + int(counts[key]))
        texts[:, rows] = _group_texts(key, digits[:, rows], kept[:, rows], exponent[rows])
        start = rows.stop
    cells[1:width, order] = texts[: width - 1]


def _group_texts(key: int, digits: np.ndarray, kept: np.ndarray,
                 exponent: np.ndarray) -> np.ndarray:  # fmt: skip
    texts = _Texts(digits, kept)
    return texts.scientific(exponent) if key == 13 else texts.fixed(key - 4)


class _Texts:
    """The texts (without their sign, a character position per row) of values from their nine
    digits (as characters, a row per digit) and which of those are kept once trailing zeros
    are removed (a ``%.6g`` text's last three digits are zeros: never kept)."""

    precision = 9

    def __init__(self, digits: np.ndarray, kept: np.ndarray) -> None:
        self.digits, self.kept = digits, kept
        self.trimmed = digits * kept
        self.out = np.zeros((_LAID_OUT_CELLS - 1, digits.shape[1]), np.uint8)

    def fixed(self, exponent: int) -> np.ndarray:
        """Fixed notation, the first digit's exponent ``exponent`` (-4 .. precision - 1)."""
        out, precision = self.out, self.precision
        if exponent < 0:  # 0.000ddd
            out[0], out[1], out[2 : 1 - exponent] = _ZERO, _POINT, _ZERO
            out[1 - exponent : 1 - exponent + precision] = self.trimmed
            return out
        out[: exponent + 1] = self.digits[: exponent + 1]
        out[exponent + 1] = _POINT
        out[exponent + 2 : precision + 1] = self.trimmed[exponent + 1 :]
        if exponent + 1 == precision:
            out[exponent + 2] = _ZERO  # TF Serving's ".0"
        else:
            out[exponent + 2] |= ~self.kept[exponent + 1] * np.uint8(_ZERO)
        return out

    def scientific(self, exponent: np.ndarray) -> np.ndarray:
        """d.ddde+XX (three exponent digits from 100)."""
        out, precision = self.out, self.precision
        out[0] = self.digits[0]
        out[1] = self.kept[1] * np.uint8(_POINT)
        out[2 : precision + 1] = self.trimmed[1:]
        out[precision + 1] = _E
        out[precision + 2] = np.where(exponent < 0, _MINUS, _PLUS)
        size = np.abs(exponent)
        out[precision + 3 : precision + 6] = _FOUR_DIGITS[np.minimum(size, 999), 1:].T
        out[precision + 3, size < 100] = 0
        return out


def _copy_others(cells: np.ndarray, flat: np.ndarray, others: np.ndarray,
                 long_double: np.ndarray) -> None:  # fmt: skip
    """The texts not laid out: zeros, doubles of 17 digits (one ``%``), the rest printed one
    by one."""
    zero = flat == 0
    texts = np.where(np.signbit(flat[zero]), b"-0.0", b"0.0")
    _copy_texts(cells, zero, texts.astype(f"S{_TEXT_CELLS}"))
    _copy_texts(cells, long_double, np.array(_long_double_texts(flat[long_double]),
                                             dtype=f"S{_TEXT_CELLS}"))  # fmt: skip
    printed = others & ~zero & ~long_double
    if printed.any():
        texts = np.array(printed_texts(flat[printed]), dtype=f"S{_TEXT_CELLS}")
        _copy_texts(cells, printed, texts)


def rounded_digits(
    magnitude: np.ndarray, precision: int, of_floats: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each positive normal value rounded to ``precision`` significant digits as ``%g`` does:
    (the digits as one integer, in a float64; the decimal exponent of the first; whether
    that is certain).

    Scaled by an exact power of ten (one float64 product or quotient, within half its
    spacing of the exact one), a value not that close to a half rounds to the same integer;
    a carry to ``10**precision`` moves the exponent. Exponents beyond an exact power of ten
    and ties too close to call are not certain. For the values of a float (``of_floats``,
    24 significant bits), a product by up to 10**12 is exact: a tie is then one, rounded to
    even as ``%g`` rounds it.
    """
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        exponent = np.floor(np.log10(magnitude)).astype(np.int64)
        shift = precision - 1 - exponent
        certain = np.abs(shift) <= _EXACT_POWERS
        scaled = _scaled(magnitude, np.where(certain, shift, 0))
        exact = (shift >= 0) & (shift <= (_EXACT_FLOAT_PRODUCT if of_floats else -1))
        if not exact.all():  # (a float's values of usual magnitudes: all exact, no tie test)
            certain &= (np.abs(scaled - np.floor(scaled) - 0.5) > 2 * np.spacing(scaled)) | exact
        digits = np.where(certain, np.rint(scaled), 10.0 ** (precision - 1))
        carried = digits == 10.0**precision
        digits = np.where(carried, 10.0 ** (precision - 1), digits)
        exponent = exponent + carried
        low, high = 10.0 ** (precision - 1), 10.0**precision
        certain &= (
            (digits >= low)
            & (digits < high)
            & (np.abs(exponent - (precision - 1)) <= _EXACT_POWERS)
        )
    return digits, exponent, certain


def _scaled(values: np.ndarray, power: np.ndarray) -> np.ndarray:
    """``values * 10**power``, one correctly rounded operation for |power| <= 22."""
    if power.size and power.min() == power.max():  # one power (one magnitude): a scalar
        one = int(power.flat[0])
        scalar = _POWERS[min(abs(one), _EXACT_POWERS)]
        return values * scalar if one >= 0 else values / scalar
    factor = _POWERS[np.minimum(np.abs(power), _EXACT_POWERS)]
    if power.min(initial=0) >= 0:
        return values * factor
    return np.where(power >= 0, values * factor, values / factor)


def _copy_texts(cells: np.ndarray, rows: np.ndarray, texts: np.ndarray) -> None:
    if texts.size:
        cells[:_TEXT_CELLS, rows] = texts.view(np.uint8).reshape(-1, _TEXT_CELLS).T


def _long_double_texts(values: np.ndarray) -> list[str]:
    """``%.17g`` of finite doubles (and ``.0`` where integral), in one ``%``."""
    integral = (np.floor(values) == values) & (np.abs(values) < 1e17)
    formats = np.where(integral, "%.17g.0", "%.17g").tolist()
    return ("\0".join(formats) % tuple(values.tolist())).split("\0") if formats else []


def printed_texts(values: np.ndarray) -> list[str]:
    """The rule applied literally, a value at a time in plain Python (~0.6 us a value): for
    the values NumPy cannot decide, and for a few values (``wire/tfs_json``), whose texts
    would otherwise cost the ~60 array operations that decide those of thousands (~50 us)."""
    if values.dtype == np.float64:
        return [_printed(value, _same_double, ".17g") for value in values.reshape(-1).tolist()]
    widened = values.astype(np.float32).astype(np.float64).reshape(-1).tolist()
    return [_printed(value, _same_float, ".9g") for value in widened]


def _printed(value: float, reads_back: Callable[[str, float], bool], long_format: str) -> str:
    if value - value != 0.0:  # NaN or an infinity
        return non_finite_text(value)
    text = f"{value:.6g}"
    if not reads_back(text, value):
        text = format(value, long_format)
    return text if "." in text or "e" in text else text + ".0"


def _same_double(text: str, value: float) -> bool:
    return float(text) == value


def _same_float(text: str, value: float) -> bool:
    """Whether ``text`` parsed and cast to float32, as TF Serving parses it, is ``value``."""
    try:
        return _FLOAT32.unpack(_FLOAT32.pack(float(text)))[0] == value
    except OverflowError:  # beyond float32's range: it does not read back
        return False


_FLOAT32 = struct.Struct("f")


def non_finite_text(value: float) -> str:
    if value != value:
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"
