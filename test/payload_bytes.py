"""Request bodies of the fast path's binary types, built with NumPy, zipfile and Pillow.

Shared by the unit tests of the codecs, the stack tests and the bad-request generator
(test/reliability/bad_requests.py), which spoil these valid bodies.
"""

from __future__ import annotations

import functools
import io
import zipfile

import numpy as np
from PIL import Image


def npy_bytes(array: np.ndarray) -> bytes:
    """``array`` as a ``.npy`` file."""
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def npz_bytes(**arrays: np.ndarray) -> bytes:
    """The arrays as an ``.npz`` archive (``np.savez``: members stored, named NAME.npy)."""
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def zip_bytes(members: dict[str, bytes], compression: int = zipfile.ZIP_STORED) -> bytes:
    """A zip of the given members as they are (to build ``.npz`` archives np.savez would not)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=compression) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def zip_needing_version_11_3(archive: bytes) -> bytes:
    """The zip with its first member saying it needs zip version 11.3 (zipfile raises
    NotImplementedError on reading it)."""
    data = bytearray(archive)
    local = data.find(b"PK\x03\x04")
    data[local + 4 : local + 6] = bytes([113, 3])
    central = data.find(b"PK\x01\x02")
    data[central + 6 : central + 8] = bytes([113, 3])
    return bytes(data)


@functools.cache  # the bad-request generator asks for the same large images again and again
def image_bytes(
    size: tuple[int, int], mode: str = "RGB", fmt: str = "PNG", color: object = 0
) -> bytes:
    """An encoded image of one ``color`` (width, height)."""
    buffer = io.BytesIO()
    Image.new(mode, size, color).save(buffer, format=fmt)
    return buffer.getvalue()


def png_of(pixels: np.ndarray) -> bytes:
    """The PNG of these uint8 pixels (HxW or HxWxC)."""
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def image_stream_bytes(images: list[bytes]) -> bytes:
    """``application/x-image-stream``: each image after its 4-byte big-endian length."""
    return b"".join(len(image).to_bytes(4, "big") + image for image in images)
