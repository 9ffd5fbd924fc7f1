"""sagemaker_tfs.service.codecs.registry, image_inputs, content_types and numpy_codecs: request
decoding and response encoding, with real files."""

from __future__ import annotations

import io
import json
import pickle
import zipfile
from collections.abc import Callable, Sequence

import numpy as np
import pytest
from payload_bytes import (
    image_bytes,
    image_stream_bytes,
    npy_bytes,
    npz_bytes,
    zip_bytes,
    zip_needing_version_11_3,
)
from PIL import Image
from sagemaker_tfs.service.codecs import content_types, image_inputs, numpy_codecs, registry
from sagemaker_tfs.service.codecs.image_inputs import ImageOptions
from sagemaker_tfs.wire import errors
from sagemaker_tfs.wire.errors import HttpError
from sagemaker_tfs.wire.http_headers import accept_list
from sagemaker_tfs.wire.pixels import PixelCast
from sagemaker_tfs.wire.signatures import TensorSpec

DT_FLOAT, DT_UINT8, DT_STRING, DT_INT32, DT_INT64 = 1, 4, 7, 3, 9
IMAGE_INPUT = {"images": TensorSpec("images", DT_FLOAT, (-1, 8, 6, 3))}
NO_SCALING = ImageOptions()
RED = (200, 10, 30)


def decode_widened(body: bytes, kind: str, specs: dict, options: ImageOptions) -> dict:
    """The arrays as the signature wants them (image pixels widened as the model server would)."""
    return registry.decode_request(body, kind, specs, options).widened()


def test_png_is_resized_to_the_signature_in_rgb_order() -> None:
    arrays = decode_widened(image_bytes((20, 10), color=RED), "image/png", IMAGE_INPUT, NO_SCALING)
    batch = arrays["images"]
    assert batch.shape == (1, 8, 6, 3) and batch.dtype == np.float32
    np.testing.assert_array_equal(batch[0, 0, 0], [200, 10, 30])


def test_scaling_applies_to_float_inputs() -> None:
    options = ImageOptions(scale=0.5, offset=-1.0)
    batch = decode_widened(image_bytes((6, 8), color=RED), "image/png", IMAGE_INPUT, options)
    np.testing.assert_allclose(batch["images"][0, 0, 0], [99, 4, 14])
    uint8_input = {"x": TensorSpec("x", DT_UINT8, (-1, -1, -1, 3))}
    raw = decode_widened(image_bytes((5, 4), color=RED), "image/png", uint8_input, options)["x"]
    assert raw.dtype == np.uint8 and raw.shape == (1, 4, 5, 3) and raw[0, 0, 0, 0] == 200


def test_pixels_for_a_float_input_stay_uint8_with_their_cast() -> None:
    """decode_request leaves the widening to whoever sends the request (the model server
    widens when it can); decode_request(...).widened() gives the same values."""
    options = ImageOptions(scale=0.5, offset=-1.0)
    body = image_stream_bytes([image_bytes((6, 8), color=RED)] * 2)
    decoded = registry.decode_request(body, "application/x-image-stream", IMAGE_INPUT, options)
    assert decoded.arrays["images"].dtype == np.uint8
    assert decoded.casts == {"images": PixelCast("float32", 0.5, -1.0)}
    assert decoded.widened_bytes() == 2 * 8 * 6 * 3 * 4 == 4 * decoded.arrays["images"].nbytes
    widened = decode_widened(body, "application/x-image-stream", IMAGE_INPUT, options)
    np.testing.assert_array_equal(decoded.widened()["images"], widened["images"])
    uint8_input = {"x": TensorSpec("x", DT_UINT8, (-1, 8, 6, 3))}
    assert (
        registry.decode_request(body, "application/x-image-stream", uint8_input, options).casts
        == {}
    )


def test_jpeg_stream_becomes_one_batch() -> None:
    body = image_stream_bytes(
        [image_bytes((16, 16), fmt="JPEG", color=(i * 40, 0, 0)) for i in range(3)]
    )
    batch = decode_widened(body, "application/x-image-stream", IMAGE_INPUT, NO_SCALING)
    assert batch["images"].shape == (3, 8, 6, 3)
    assert batch["images"][2, 0, 0, 0] > batch["images"][1, 0, 0, 0] > batch["images"][0, 0, 0, 0]


def test_seed_stream_terminated_by_zero_length_is_accepted() -> None:
    body = image_stream_bytes([image_bytes((4, 4), color=RED)]) + (0).to_bytes(4, "big")
    assert len(image_inputs.split_image_stream(body)) == 1


def test_string_input_gets_the_encoded_bytes_unchanged() -> None:
    images = [
        image_bytes((4, 4), fmt="JPEG", color=RED),
        image_bytes((5, 5), fmt="JPEG", color=RED),
    ]
    spec = {"image_bytes": TensorSpec("image_bytes", DT_STRING, (-1,))}
    batch = decode_widened(
        image_stream_bytes(images), "application/x-image-stream", spec, NO_SCALING
    )
    assert batch["image_bytes"].tolist() == images
    single = decode_widened(images[0], "application/x-image", spec, NO_SCALING)
    assert single["image_bytes"].tolist() == images[:1]


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (
            image_stream_bytes([image_bytes((4, 4), color=RED)])[:-3],
            "Truncated image stream: record 0 declares",
        ),
        (
            image_stream_bytes([image_bytes((4, 4), color=RED)]) + b"\x00\x00",
            "partial length header",
        ),
        (b"\x00\x00\x00\x00", "Empty image stream"),
        (
            image_stream_bytes([image_bytes((4, 4), color=RED)])
            + (0).to_bytes(4, "big")
            + image_stream_bytes([image_bytes((4, 4), color=RED)]),
            "record 1 has length 0, which ends the stream, but [0-9]+ more bytes follow",
        ),
        (image_stream_bytes([b"not an image at all"]), "Image 0 cannot be decoded"),
    ],
)
def test_bad_image_streams(body: bytes, match: str) -> None:
    with pytest.raises(HttpError, match=match) as raised:
        decode_widened(body, "application/x-image-stream", IMAGE_INPUT, NO_SCALING)
    assert raised.value.status == 400


def test_varying_sizes_need_a_fixed_model_size() -> None:
    free = {"x": TensorSpec("x", DT_FLOAT, (-1, -1, -1, 3))}
    body = image_stream_bytes([image_bytes((4, 4), color=RED), image_bytes((5, 4), color=RED)])
    with pytest.raises(HttpError, match="same size"):
        decode_widened(body, "application/x-image-stream", free, NO_SCALING)


def test_npy_roundtrip_with_same_kind_cast() -> None:
    spec = {"x": TensorSpec("x", DT_FLOAT, (-1, 3))}
    decoded = decode_widened(
        npy_bytes(np.ones((2, 3), np.int64)), "application/x-npy", spec, NO_SCALING
    )
    assert decoded["x"].dtype == np.float32 and decoded["x"].shape == (2, 3)


@pytest.mark.parametrize(
    "array",
    [
        np.arange(12, dtype=np.float32).reshape(3, 4),
        np.asfortranarray(np.arange(12, dtype=np.float64).reshape(3, 4)),
        np.arange(6, dtype=">i4").reshape(2, 3),
        np.zeros((0, 3), np.float32),
        np.array(3.5, np.float32),
    ],
)
def test_npy_is_read_in_place(array: np.ndarray) -> None:
    """The array is a read-only view of the body's bytes: a 1 GB body is not copied."""
    body = npy_bytes(array)
    decoded = numpy_codecs.decode_npy(body)
    assert decoded.dtype == array.dtype and decoded.shape == array.shape
    np.testing.assert_array_equal(decoded, array)
    if array.size:
        assert np.shares_memory(decoded, np.frombuffer(body, np.uint8))
        assert not decoded.flags.writeable


@pytest.mark.parametrize(
    ("array", "spec", "match"),
    [
        (
            np.ones((2, 3), np.float64),
            TensorSpec("x", DT_INT32, (-1, 3)),
            "expects DT_INT32, got an array of float64",
        ),
        (
            np.array(["a"]),
            TensorSpec("x", DT_FLOAT, (-1,)),
            "expects DT_FLOAT, got an array of <U1",
        ),
        (np.ones(2, np.float32), TensorSpec("x", DT_STRING, (-1,)), "expects DT_STRING"),
    ],
)
def test_wrong_arrays_are_refused(array: np.ndarray, spec: TensorSpec, match: str) -> None:
    with pytest.raises(HttpError, match=match) as raised:
        decode_widened(npy_bytes(array), "application/x-npy", {"x": spec}, NO_SCALING)
    assert raised.value.status == 400


def test_pickled_npy_is_refused_without_unpickling() -> None:
    class Boom:
        def __reduce__(self):  # would run on unpickling
            return (pytest.fail, ("unpickled!",))

    body = npy_bytes(np.array([Boom()], dtype=object))
    assert b"pytest" in body and pickle  # the payload really carries a pickle
    with pytest.raises(HttpError, match="Pickled object arrays are not accepted"):
        decode_widened(
            body, "application/x-npy", {"x": TensorSpec("x", DT_FLOAT, None)}, NO_SCALING
        )


def test_npz_named_inputs() -> None:
    body = npz_bytes(a=np.ones(2, np.float32), b=np.arange(3, dtype=np.int32))
    specs = {"a": TensorSpec("a", DT_FLOAT, (-1,)), "b": TensorSpec("b", DT_INT32, (-1,))}
    decoded = decode_widened(body, "application/x-npz", specs, NO_SCALING)
    assert sorted(decoded) == ["a", "b"] and decoded["b"].tolist() == [0, 1, 2]
    with pytest.raises(HttpError, match=r"not inputs of the signature"):
        decode_widened(body, "application/x-npz", {"a": specs["a"]}, NO_SCALING)
    with pytest.raises(HttpError, match=r"signature has 2 \(a, b\); send application/x-npz"):
        decode_widened(npy_bytes(np.ones(2)), "application/x-npy", specs, NO_SCALING)


@pytest.mark.parametrize(
    ("body", "content_type", "status", "match"),
    [
        (b"", "application/x-npy", 400, "Empty request body"),
        (b"garbage", "application/x-npy", 400, "Invalid .npy payload"),
        (b"garbage", "application/x-npz", 400, "Invalid .npz payload"),
        (b"garbage", "image/jpeg", 400, "Image 0 cannot be decoded"),
        (b"x", "application/octet-stream", 415, "Unsupported Media Type: application/octet-stream"),
    ],
)
def test_bad_bodies(body: bytes, content_type: str, status: int, match: str) -> None:
    with pytest.raises(HttpError, match=match) as raised:
        decode_widened(body, content_type, IMAGE_INPUT, NO_SCALING)
    assert raised.value.status == status


def test_accept_negotiation() -> None:
    def choose(header: str | None) -> str | None:
        return registry.CODECS.choose_output_type(accept_list(header))

    assert choose(None) == "application/json"
    assert choose("*/*") == "application/json"
    assert choose("text/html, application/x-npy;q=0.9") == "application/x-npy"
    assert choose("text/html") is None
    refused = registry.CODECS.not_acceptable(accept_list("text/html"))
    assert refused.status == 406 and refused.message.startswith("Not Acceptable: text/html")


def encoded(outputs: dict, output_type: str) -> tuple[bytes, str]:
    """encode_outputs' chunks joined into the body the client receives."""
    chunks, content_type = registry.encode_outputs(outputs, output_type)
    return b"".join(chunks), content_type


OUTPUTS = {
    "scores": np.array([[0.5, 1.25], [3.0, -1.0]], np.float32),
    "labels": np.array([b"cat", b"\xff"], dtype=object),
}


def test_json_rows_like_tf_serving() -> None:
    body, content_type = encoded({"s": OUTPUTS["scores"]}, "application/json")
    assert content_type == "application/json"
    assert json.loads(body) == {"predictions": [[0.5, 1.25], [3.0, -1.0]]}
    body, _ = encoded(OUTPUTS, "application/jsonlines")
    assert b"\n" not in body
    assert json.loads(body)["predictions"] == [
        {"labels": "cat", "scores": [0.5, 1.25]},
        {"labels": {"b64": "/w=="}, "scores": [3.0, -1.0]},
    ]


def test_npy_npz_csv_outputs() -> None:
    body, _ = encoded({"s": OUTPUTS["scores"]}, "application/x-npy")
    np.testing.assert_array_equal(np.load(io.BytesIO(body)), OUTPUTS["scores"])
    body, _ = encoded(OUTPUTS, "application/x-npz")
    with np.load(io.BytesIO(body), allow_pickle=False) as archive:
        assert archive["labels"].tolist() == [b"cat", b"\xff"]
        np.testing.assert_array_equal(archive["scores"], OUTPUTS["scores"])
    body, content_type = encoded({"s": OUTPUTS["scores"]}, "text/csv")
    assert (body, content_type) == (b"0.5,1.25\n3,-1\n", "text/csv")
    with pytest.raises(HttpError, match="returns 2 outputs") as raised:
        encoded(OUTPUTS, "application/x-npy")
    assert raised.value.status == 406


def test_numpy_answers_read_back_like_np_save_and_refer_to_the_outputs() -> None:
    outputs = {
        "scalar": np.float64(2.5),
        "fortran": np.asfortranarray(np.arange(6, dtype=np.int32).reshape(2, 3)),
        "big_endian": np.arange(3, dtype=">f4"),
        "empty": np.zeros((0, 3), np.float32),
        "half": np.ones(2, np.float16),
    }
    body, _ = encoded(outputs, "application/x-npz")
    with np.load(io.BytesIO(body), allow_pickle=False) as archive:
        assert sorted(archive.files) == sorted(outputs)
        for name, array in outputs.items():
            assert archive[name].shape == np.shape(array), name
            assert archive[name].dtype == np.asarray(array).dtype, name
            np.testing.assert_array_equal(archive[name], array)
    big = np.random.default_rng(3).random((64, 64), dtype=np.float32)
    for kind in ("application/x-npy", "application/x-npz"):
        chunks, _ = registry.encode_outputs({"big": big}, kind)
        views = [chunk for chunk in chunks if isinstance(chunk, memoryview)]
        assert any(np.shares_memory(np.frombuffer(view, np.uint8), big) for view in views), kind


def test_json_and_csv_inputs_for_binary_answers() -> None:
    spec = {"x": TensorSpec("x", DT_FLOAT, (-1, 2))}
    for body, kind in [
        (b'{"instances": [[1, 2], [3, 4]]}', "application/json"),
        (b"[1, 2]\n[3, 4]\n", "application/jsonlines"),
        (b"1,2\n3,4\n", "text/csv"),
    ]:
        decoded = decode_widened(body, kind, spec, NO_SCALING)["x"]
        assert decoded.dtype == np.float32 and decoded.tolist() == [[1, 2], [3, 4]], kind
    two = {"a": TensorSpec("a", DT_FLOAT, (-1,)), "b": TensorSpec("b", DT_INT32, (-1,))}
    rows = b'{"instances": [{"a": 1.5, "b": 1}, {"a": 2.5, "b": 2}]}'
    decoded = decode_widened(rows, "application/json", two, NO_SCALING)
    assert decoded["a"].tolist() == [1.5, 2.5] and decoded["b"].dtype == np.int32
    with pytest.raises(HttpError, match="Invalid JSON: "):
        decode_widened(b"{", "application/json", spec, NO_SCALING)
    with pytest.raises(HttpError, match="Encountered list at unexpected size"):
        decode_widened(b"[[1, 2], [3]]", "application/json", spec, NO_SCALING)
    with pytest.raises(HttpError, match=r"Inputs \['c'\] are not in the signature"):
        decode_widened(b'{"inputs": {"c": [1]}}', "application/json", two, NO_SCALING)


def test_one_column_csv_is_a_batch_of_scalars_whatever_the_accept() -> None:
    """Each one-value row is an instance, as the REST path reads it with a JSON answer (so
    Batch Transform's CSV with a CSV Accept works on a rank-1 input), whatever the input's
    rank: the Accept header does not change how a body is read (issue 53)."""
    body = b"1.0\n2.5\n5\n"
    for shape in [(-1,), (-1, 1), None, ()]:
        column = {"x": TensorSpec("x", DT_FLOAT, shape)}
        decoded = decode_widened(body, "text/csv", column, NO_SCALING)["x"]
        assert decoded.tolist() == [1.0, 2.5, 5.0], shape


@pytest.mark.parametrize(
    ("shape", "spec_shape"), [((2, 4), (-1, 3)), ((2, 2), (-1,)), ((3,), ()), ((1, 2, 3), (-1, 3))]
)
def test_shapes_go_to_the_model_server_unchecked(shape: tuple, spec_shape: tuple) -> None:
    """TF Serving's Predict does not compare a tensor's shape with the signature's; the
    model's graph decides, so the service passes any shape on (dtype is still checked)."""
    array = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
    spec = {"x": TensorSpec("x", DT_FLOAT, spec_shape)}
    decoded = decode_widened(npy_bytes(array), "application/x-npy", spec, NO_SCALING)["x"]
    assert decoded.shape == shape and decoded.dtype == np.float32
    np.testing.assert_array_equal(decoded, array)


def test_json_of_numeric_outputs_matches_the_standard_library() -> None:
    rng = np.random.default_rng(5)
    outputs = {
        "boxes": rng.normal(size=(3, 4, 2)).astype(np.float32),
        "count": np.array([1, 2, 3], np.int64),
        "mask": np.array([[True], [False], [True]]),
    }
    body, _ = encoded(outputs, "application/json")
    rows = json.loads(body)["predictions"]
    assert [sorted(row) for row in rows] == [["boxes", "count", "mask"]] * 3
    for index, row in enumerate(rows):
        np.testing.assert_array_equal(np.float32(row["boxes"]), outputs["boxes"][index])
        assert row["count"] == index + 1 and row["mask"] == [bool(outputs["mask"][index, 0])]


def test_json_keeps_tf_serving_non_finite_literals() -> None:
    body, _ = encoded({"x": np.array([1.5, np.nan, np.inf], np.float32)}, "application/json")
    assert body == b'{"predictions":[1.5,NaN,Infinity]}'


# ---------------------------------------------------------------- hostile bodies (issue 10)

FLOAT_ROWS = {"x": TensorSpec("x", DT_FLOAT, (-1, 3))}


GOOD_NPY = npy_bytes(np.ones((2, 3), np.float32))
GOOD_NPZ = zip_bytes({"x.npy": GOOD_NPY})


@pytest.mark.parametrize(
    ("kind", "body", "status", "text"),
    [
        (content_types.NPZ, b"PK\x03\x04" + bytes(5), 400, "BadZipFile"),
        (content_types.NPZ, zip_needing_version_11_3(GOOD_NPZ), 400, "zip file version"),
        (
            content_types.NPZ,
            zip_bytes({"x.npy": zip_bytes({"a.npy": GOOD_NPY})}),
            400,
            "not an .npy array",
        ),
        (content_types.NPZ, zip_bytes({"x.npy": GOOD_NPY[:-4]}), 400, "20 bytes of data follow"),
        (content_types.NPZ, zip_bytes({"x.npy": GOOD_NPY, "x": GOOD_NPY}), 400, "appears twice"),
        (content_types.NPZ, zip_bytes({}), 400, "no arrays"),
        (content_types.NPY, GOOD_NPY.replace(b"'descr'", b"'''des"), 400, "TokenError"),
        (
            content_types.NPY,
            GOOD_NPY.replace(b"(2, 3)", b"(10000000000,)"),
            400,
            "40000000000 bytes",
        ),
        (content_types.NPY, GOOD_NPY + b"\x00", 400, "25 bytes of data follow"),
        (content_types.NPY, GOOD_NPY.replace(b"<f4", b"|O "), 400, "descr"),
        (content_types.JSON, b"[" * 10000 + b"]" * 10000, 400, "Nested too deep"),
        (content_types.JSON, b"[[" + b"1" * 5000 + b",1,1]]", 400, "digits"),
    ],
)
def test_corrupted_binary_bodies_are_400(kind: str, body: bytes, status: int, text: str) -> None:
    with pytest.raises(HttpError) as caught:
        decode_widened(body, kind, FLOAT_ROWS, ImageOptions())
    assert caught.value.status == status
    assert text in caught.value.message
    assert len(caught.value.message) <= errors.MESSAGE_CHARS + 3


def test_stored_npz_members_are_read_in_place() -> None:
    """np.savez stores its members: each array is a read-only view of the body (a 1 GB
    archive is not copied), as an .npy body's is; np.savez_compressed's are read out."""
    arrays = {"a": np.arange(12, dtype=np.float32).reshape(4, 3), "b": np.arange(5, dtype=np.int64)}
    specs = {"a": TensorSpec("a", DT_FLOAT, (-1, 3)), "b": TensorSpec("b", DT_INT64, (-1,))}
    body = npz_bytes(**arrays)
    decoded = decode_widened(body, content_types.NPZ, specs, NO_SCALING)
    for name, array in arrays.items():
        np.testing.assert_array_equal(decoded[name], array)
        assert np.shares_memory(decoded[name], np.frombuffer(body, np.uint8))
        assert not decoded[name].flags.writeable
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    unpacked = decode_widened(buffer.getvalue(), content_types.NPZ, specs, NO_SCALING)
    for name, array in arrays.items():
        np.testing.assert_array_equal(unpacked[name], array)


def test_a_stored_npz_member_is_checked_as_zipfile_checks_it() -> None:
    """Its CRC-32 (a changed byte is a 400, as np.load's BadZipFile), the encryption flag;
    bytes before the archive (zipfile allows them) move every member, and are allowed."""
    array = np.arange(6, dtype=np.float32).reshape(2, 3)
    body = npz_bytes(x=array)
    prefixed = decode_widened(b"prefix" + body, content_types.NPZ, FLOAT_ROWS, NO_SCALING)
    np.testing.assert_array_equal(prefixed["x"], array)
    changed = bytearray(body)
    changed[body.index(array.tobytes()) + 5] ^= 0xFF
    with pytest.raises(HttpError, match="do not match its size and CRC-32") as caught:
        decode_widened(bytes(changed), content_types.NPZ, FLOAT_ROWS, NO_SCALING)
    assert caught.value.status == 400
    encrypted = bytearray(body)
    flags = body.index(b"PK\x01\x02") + 8  # the central directory entry's flag bits
    encrypted[flags] |= 0x1
    with pytest.raises(HttpError, match="encrypted"):
        decode_widened(bytes(encrypted), content_types.NPZ, FLOAT_ROWS, NO_SCALING)


def test_a_deflated_npz_declaring_gigabytes_is_refused_before_decompressing() -> None:
    header = GOOD_NPY.replace(b"(2, 3)", b"(100000000, 3)")[:128]
    bomb = zip_bytes({"x.npy": header + bytes(100_000_000 * 12)}, zipfile.ZIP_DEFLATED)
    assert len(bomb) < 2_000_000
    with pytest.raises(HttpError) as caught:
        decode_widened(bomb, content_types.NPZ, FLOAT_ROWS, ImageOptions())
    assert caught.value.status == 413


def test_an_npy_member_declaring_more_than_its_bytes_is_refused() -> None:
    member = GOOD_NPY.replace(b"(2, 3)", b"(10000000000,)")
    with pytest.raises(HttpError) as caught:
        decode_widened(zip_bytes({"x.npy": member}), content_types.NPZ, FLOAT_ROWS, ImageOptions())
    assert caught.value.status == 400
    assert "40000000000 bytes" in caught.value.message


@pytest.mark.parametrize("side", [9000, 20000])
def test_images_declaring_too_many_pixels_are_413_before_decoding(side: int) -> None:
    png = image_bytes((side, side), "L")  # a few hundred KB of zeros
    spec = {"x": TensorSpec("x", DT_FLOAT, (-1, -1, -1, 3))}
    for kind, body in (
        ("image/png", png),
        (content_types.IMAGE_STREAM, image_stream_bytes([png])),
    ):
        with pytest.raises(HttpError) as caught:
            decode_widened(body, kind, spec, ImageOptions())
        assert caught.value.status == 413, caught.value.message


def test_an_image_stream_whose_images_add_up_to_too_much_is_413() -> None:
    record = image_stream_bytes([image_bytes((4000, 4000))])
    spec = {"x": TensorSpec("x", DT_FLOAT, (-1, -1, -1, 3))}
    with pytest.raises(HttpError) as caught:  # 6 x 4000 x 4000 x 3 floats = 1.15 GB
        decode_widened(record * 6, content_types.IMAGE_STREAM, spec, ImageOptions())
    assert caught.value.status == 413
    assert "more than" in caught.value.message


def test_random_bytes_as_csv_give_a_short_printable_message() -> None:
    with pytest.raises(HttpError) as caught:
        decode_widened(bytes(range(256)) * 20, content_types.CSV, FLOAT_ROWS, ImageOptions())
    assert caught.value.status == 400
    json.loads(json.dumps({"error": caught.value.message}).encode("utf-8"))
    assert len(caught.value.message) <= errors.MESSAGE_CHARS + 3


def test_text_bodies_with_a_binary_accept_are_read_as_the_njs_path_sends_them() -> None:
    """Parsed by the same rules whatever the Accept (text_codecs.read_body)."""
    pair = {"x": TensorSpec("x", DT_FLOAT, (-1, 2))}
    flat = decode_widened(b"[1, 2]", content_types.JSON, pair, NO_SCALING)["x"]
    assert flat.tolist() == [[1.0, 2.0]]  # a bare list is one instance, as with a JSON answer
    lines = decode_widened(b"[1, 2]\n[3, 4]", content_types.JSON, pair, NO_SCALING)["x"]
    assert lines.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    with_bom = decode_widened(b"\xef\xbb\xbf1,2\n", content_types.CSV, pair, NO_SCALING)["x"]
    assert with_bom.tolist() == [[1.0, 2.0]]
    text = {"s": TensorSpec("s", DT_STRING, (-1,))}
    quoted = decode_widened(b'"a ""b"""\nc\n', content_types.CSV, text, NO_SCALING)["s"]
    assert quoted.tolist() == ['a "b"', "c"]
    with pytest.raises(HttpError, match="Number too big to be stored in double"):
        decode_widened(b"1" * 5000, content_types.CSV, pair, NO_SCALING)  # as the REST API


@pytest.fixture(params=["in the request's thread", "on the cores"])
def decoding(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways a stream is decoded: small batches in the request's thread, large ones on
    two native threads (the threshold lowered so that these small images take that way)."""
    if request.param == "on the cores":
        monkeypatch.setattr(image_inputs, "DECODE_ON_CORES_MIN_BYTES", 0)
        monkeypatch.setattr(image_inputs, "usable_cores", lambda: 2)
    return request.param


def test_only_a_batch_of_a_mib_or_more_is_decoded_on_the_cores(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spread: list[int] = []
    on_cores = image_inputs.map_on_cores

    def recording_map_on_cores(function: Callable[[int], None], items: Sequence[int]) -> list:
        spread.append(len(items))
        return on_cores(function, items)

    monkeypatch.setattr(image_inputs, "map_on_cores", recording_map_on_cores)
    side = 256  # 256 x 256 x 3 uint8 = 192 KiB per image
    spec = {"x": TensorSpec("x", DT_UINT8, (-1, side, side, 3))}
    image = image_bytes((side, side), fmt="JPEG", color=RED)
    for count in (5, 6):  # 960 KiB, then 1,152 KiB of pixels
        body = image_stream_bytes([image] * count)
        batch = decode_widened(body, "application/x-image-stream", spec, NO_SCALING)["x"]
        assert batch.shape == (count, side, side, 3)
    assert spread == [6]


def test_a_stream_of_mixed_image_modes_gives_the_same_pixels_as_pillow(decoding: str) -> None:
    """Each image is decoded straight into its place in the batch, converted only when its
    mode is not the input's."""
    rgb = Image.new("RGB", (6, 8), RED)
    palette = rgb.convert("P", palette=Image.Palette.ADAPTIVE, colors=4)
    gray = Image.new("L", (6, 8), 77)
    rgba = Image.new("RGBA", (6, 8), (1, 2, 3, 4))
    images = [rgb, palette, gray, rgba]
    encoded = [image_bytes_of(image, "PNG") for image in images]
    body = image_stream_bytes(encoded)
    for channels, mode in ((3, "RGB"), (1, "L"), (4, "RGBA")):
        spec = {"x": TensorSpec("x", DT_UINT8, (-1, 8, 6, channels))}
        batch = decode_widened(body, "application/x-image-stream", spec, NO_SCALING)["x"]
        expected = np.stack(
            [np.asarray(image.convert(mode)).reshape(8, 6, channels) for image in images]
        )
        np.testing.assert_array_equal(batch, expected)


def test_a_bad_image_in_the_middle_of_a_stream_is_named(decoding: str) -> None:
    """Its header is whole (so its size is read), its pixels cut short: decoding fails."""
    noise = np.random.default_rng(0).integers(0, 256, (64, 64, 3), dtype=np.uint8)
    good = image_bytes_of(Image.fromarray(noise), "JPEG")
    truncated = good[: len(good) * 2 // 3]
    body = image_stream_bytes([good, good, truncated, good])
    with pytest.raises(HttpError, match="Image 2 cannot be decoded: .*truncated") as raised:
        decode_widened(body, "application/x-image-stream", IMAGE_INPUT, NO_SCALING)
    assert raised.value.status == 400


def image_bytes_of(image: Image.Image, fmt: str) -> bytes:
    out = io.BytesIO()
    image.save(out, format=fmt)
    return out.getvalue()
