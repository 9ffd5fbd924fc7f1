"""Decoded pixels widened to a model's float input: ``value = pixel * scale + offset``.

The fast path decodes images to ``uint8``. A float32 model wants four bytes per pixel, so
widening in the service makes the request to the model server four times larger than the
pixels (31 MB instead of 7.8 MB for ten 512x512 images). Over the project's streamed Predict
the service sends the ``uint8`` pixels and names the widening in the call's gRPC metadata
(``METADATA_KEY``); the model server widens them with :meth:`PixelCast.apply`, the same code,
so the model gets the same values bit for bit. TF Serving's binary lacks that method: there,
and over Predict, the client widens before sending (``widen``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

METADATA_KEY = "sagemaker-tfs-pixel-casts"  # gRPC metadata keys are lower case


@dataclass(frozen=True)
class PixelCast:
    """How one input's integer pixels become the float values the model wants."""

    dtype: str  # a NumPy float type name: "float32", "float16", "float64"
    scale: float = 1.0
    offset: float = 0.0

    def __post_init__(self) -> None:
        kind: str
        try:
            kind = np.dtype(self.dtype).kind
        except TypeError:
            kind = ""
        if kind != "f":
            raise ValueError(f"pixels can be widened to a float type, not {self.dtype!r}")
        if not (math.isfinite(self.scale) and math.isfinite(self.offset)):
            raise ValueError(
                f"pixel scale and offset must be finite, got {self.scale}, {self.offset}"
            )

    @property
    def itemsize(self) -> int:
        return np.dtype(self.dtype).itemsize

    def apply(self, pixels: np.ndarray) -> np.ndarray:
        """The widened values (computed in float32, then converted to ``dtype``)."""
        if pixels.dtype.kind not in "iu":
            raise ValueError(f"pixels to widen must be integers, got {pixels.dtype}")
        values = pixels.astype(np.float32)
        if self.scale != 1.0:
            values *= np.float32(self.scale)
        if self.offset != 0.0:
            values += np.float32(self.offset)
        return values.astype(self.dtype, copy=False)


def widen(
    arrays: Mapping[str, np.ndarray], casts: Mapping[str, PixelCast]
) -> dict[str, np.ndarray]:
    """``arrays`` with the inputs named in ``casts`` widened (the others unchanged)."""
    check(arrays, casts)
    return {
        name: casts[name].apply(np.asarray(array)) if name in casts else array
        for name, array in arrays.items()
    }


def check(arrays: Mapping[str, object], casts: Mapping[str, PixelCast]) -> None:
    """ValueError unless every cast names an input given as integers."""
    missing = sorted(set(casts) - set(arrays))
    if missing:
        raise ValueError(f"pixel casts name inputs that are not sent: {', '.join(missing)}")
    for name in casts:
        dtype = np.asarray(arrays[name]).dtype
        if dtype.kind not in "iu":
            raise ValueError(f"pixels to widen must be integers, got {dtype} for {name!r}")


def widened_bytes(arrays: Mapping[str, np.ndarray], casts: Mapping[str, PixelCast]) -> int:
    """The size of ``arrays`` once widened (from their sizes: nothing is converted)."""
    return sum(
        array.size * casts[name].itemsize if name in casts else array.nbytes
        for name, array in arrays.items()
    )


def to_metadata(casts: Mapping[str, PixelCast]) -> tuple[tuple[str, str], ...]:
    """The gRPC metadata naming ``casts`` (none when empty)."""
    if not casts:
        return ()
    described = {name: [cast.dtype, cast.scale, cast.offset] for name, cast in casts.items()}
    return ((METADATA_KEY, json.dumps(described, sort_keys=True)),)


def from_metadata(metadata: Iterable[tuple[str, str | bytes]] | None) -> dict[str, PixelCast]:
    """The casts a call's metadata names ({} when none); ValueError when unreadable."""
    for key, value in metadata or ():
        if key != METADATA_KEY:
            continue
        try:
            described = json.loads(value)
            return {
                str(name): PixelCast(str(dtype), float(scale), float(offset))
                for name, (dtype, scale, offset) in described.items()
            }
        except (ValueError, TypeError, AttributeError) as error:
            raise ValueError(f"unreadable {METADATA_KEY} metadata: {error}") from None
    return {}
