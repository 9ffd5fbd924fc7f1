"""Image requests of the fast path: encoded images and image streams -> one batch for an input.

``image/jpeg``, ``image/png``, ``application/x-image`` (one image) and
``application/x-image-stream`` (records of a 4-byte big-endian length followed by an encoded
image; all records form one batch). Images are converted to what the signature's input wants
(dtype, height, width, channels, RGB order); a DT_STRING input gets the encoded bytes
unchanged. Each image is decoded straight into its place in the batch, the images of a large
batch on all cores.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
from PIL import Image, UnidentifiedImageError

from sagemaker_tfs.service.codecs import native_threads
from sagemaker_tfs.service.codecs.content_types import DECODE_ERRORS, MAX_DECODED_BYTES, NPY
from sagemaker_tfs.wire import tensors
from sagemaker_tfs.wire.errors import HttpError, describe
from sagemaker_tfs.wire.pixels import PixelCast
from sagemaker_tfs.wire.signatures import TensorSpec

_RECORD_HEADER = 4
_CHANNELS_TO_MODE = {1: "L", 3: "RGB", 4: "RGBA"}
MAX_IMAGE_PIXELS = 64 * 1024 * 1024
# Below this many bytes of pixels a batch is decoded in the request's thread: the threads'
# hand-offs and their contention for the GIL in Pillow's Python cost more than they save.
# Measured on 2 cores (test/perf/bench_image_decoding.py, on the cores / in one thread):
# 64 28x28 PNGs 4.5 / 2.9 ms, four 224x224 JPEGs 1.6 / 1.7 ms, ten 512x512 JPEGs 14 / 21 ms.
DECODE_ON_CORES_MIN_BYTES = 1 << 20


@dataclass(frozen=True)
class ImageOptions:
    """How decoded pixels become float inputs: ``value = pixel * scale + offset``.

    ``SAGEMAKER_TFS_IMAGE_SCALE`` / ``_OFFSET`` (``StackConfig.service.image_scale`` /
    ``image_offset``); integer inputs always get the raw 0-255 pixels. Example: MobileNet-style
    [-1, 1] inputs use scale ``0.00784313725`` (2/255) and offset ``-1``.
    """

    scale: float = 1.0
    offset: float = 0.0


def split_image_stream(body: bytes) -> list[bytes]:
    """Split records of (4-byte big-endian length, encoded image).

    A zero length may end the stream (seed 000's handler reads until one); records after it
    would be dropped unseen, so they are an error.
    """
    view = memoryview(body)
    images: list[bytes] = []
    position = 0
    while position < len(view):
        if position + _RECORD_HEADER > len(view):
            raise HttpError(
                400, f"Truncated image stream: partial length header at byte {position}"
            )
        length = int.from_bytes(view[position : position + _RECORD_HEADER], "big")
        position += _RECORD_HEADER
        if length == 0:
            if position < len(view):
                raise HttpError(
                    400,
                    f"Image stream: record {len(images)} has length 0, which ends the stream, "
                    f"but {len(view) - position} more bytes follow it",
                )
            break
        if position + length > len(view):
            raise HttpError(
                400,
                f"Truncated image stream: record {len(images)} declares {length} bytes, "
                f"{len(view) - position} remain",
            )
        images.append(bytes(view[position : position + length]))
        position += length
    if not images:
        raise HttpError(400, "Empty image stream: no records")
    return images


def images_to_batch(
    images: list[bytes], spec: TensorSpec, options: ImageOptions
) -> tuple[np.ndarray, PixelCast | None]:
    """One batch from encoded images: bytes for DT_STRING inputs, pixels otherwise (with
    their cast when the input is a float)."""
    if spec.is_string:
        batch = np.empty(len(images), dtype=object)
        batch[:] = images
        return batch, None
    target = _image_geometry(spec)
    height, width = _batch_image_size(images, target, _itemsize(spec))
    batch = np.empty((len(images), height, width, target.channels), dtype=np.uint8)

    def decode_into_batch(index: int) -> None:
        decode_image(images[index], index, target, batch[index])

    # Each image is decoded straight into its place in the batch (no stacking copy); a large
    # batch on all cores, as Pillow decodes without the GIL.
    if batch.nbytes >= DECODE_ON_CORES_MIN_BYTES:
        native_threads.map_on_cores(decode_into_batch, range(len(images)))
    else:
        for index in range(len(images)):
            decode_into_batch(index)
    return _to_input_dtype(batch, spec, options)


@dataclass(frozen=True)
class _Geometry:
    height: int | None
    width: int | None
    channels: int


def _image_geometry(spec: TensorSpec) -> _Geometry:
    """Height, width and channels an NHWC image input wants (None = keep the image's)."""
    if spec.shape is None:
        return _Geometry(None, None, 3)
    if len(spec.shape) != 4:
        raise HttpError(
            400,
            f"Input {spec.name} of shape {list(spec.shape)} is not an NHWC image batch; "
            f"send {NPY} instead",
        )
    _, height, width, channels = spec.shape
    channels = 3 if channels < 0 else channels
    if channels not in _CHANNELS_TO_MODE:
        raise HttpError(400, f"Input {spec.name} wants {channels} channels per pixel")
    return _Geometry(height if height > 0 else None, width if width > 0 else None, channels)


def _itemsize(spec: TensorSpec) -> int:
    try:
        return tensors.numpy_dtype(spec.dtype).itemsize
    except tensors.TensorConversionError:
        return 8  # the widest; _to_input_dtype refuses the type afterwards


def _batch_image_size(images: list[bytes], target: _Geometry, itemsize: int) -> tuple[int, int]:
    """The (height, width) of the batch's images, from each image's header, before decoding
    anything: refused when the images differ and the model does not fix the size, or when an
    image or the whole input would be too large (a 100-byte PNG can declare 50,000 x 50,000
    pixels)."""
    sizes = []
    total = 0
    for index, data in enumerate(images):
        width, height = _declared_size(data, index)
        if width * height > MAX_IMAGE_PIXELS:
            raise HttpError(
                413,
                f"Image {index} declares {width} x {height} pixels; at most "
                f"{MAX_IMAGE_PIXELS} pixels are decoded",
            )
        size = (target.height or height, target.width or width)
        sizes.append(size)
        total += size[0] * size[1] * target.channels * itemsize
        if total > MAX_DECODED_BYTES:
            raise HttpError(
                413, f"The images decode to more than {MAX_DECODED_BYTES} bytes of input"
            )
    if len(set(sizes)) > 1:
        shapes = sorted({(height, width, target.channels) for height, width in sizes})
        raise HttpError(
            400,
            f"Images in one batch must have the same size when the model does not fix it, "
            f"got {shapes}",
        )
    return sizes[0]


def _declared_size(data: bytes, index: int) -> tuple[int, int]:
    """(width, height) as the image's header declares them."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            return image.size
    except Image.DecompressionBombError as error:
        raise HttpError(413, f"Image {index} is too large: {error}") from None
    except UnidentifiedImageError:
        raise HttpError(
            400, f"Image {index} cannot be decoded: not a JPEG, PNG or other known image format"
        ) from None
    except DECODE_ERRORS as error:
        raise HttpError(400, f"Image {index} cannot be decoded: {describe(error)}") from None


def decode_image(data: bytes, index: int, target: _Geometry, out: np.ndarray) -> None:
    """Decode one encoded image into ``out`` (uint8 HxWxC), in the target's channels (RGB
    order for 3), resized to ``out``'s height and width if it differs."""
    mode = _CHANNELS_TO_MODE[target.channels]
    height, width = out.shape[:2]
    try:
        with Image.open(io.BytesIO(data)) as encoded:
            encoded.load()
            image = encoded if encoded.mode == mode else encoded.convert(mode)
            if image.size != (width, height):
                image = image.resize((width, height), Image.Resampling.BILINEAR)
            pixels = np.asarray(image)
    except UnidentifiedImageError:
        raise HttpError(
            400, f"Image {index} cannot be decoded: not a JPEG, PNG or other known image format"
        ) from None
    except (*DECODE_ERRORS, Image.DecompressionBombError) as error:
        raise HttpError(400, f"Image {index} cannot be decoded: {describe(error)}") from None
    out[...] = pixels.reshape(height, width, target.channels)


def _to_input_dtype(
    batch: np.ndarray, spec: TensorSpec, options: ImageOptions
) -> tuple[np.ndarray, PixelCast | None]:
    """The batch for an integer input; the pixels and their cast for a float input."""
    target = tensors.numpy_dtype(spec.dtype)
    if target.kind == "f":
        return batch, PixelCast(target.name, options.scale, options.offset)
    if target.kind in "iu":
        return batch.astype(target, copy=False), None
    raise HttpError(
        400, f"Input {spec.name} of type {tensors.dtype_name(spec.dtype)} cannot take images"
    )
