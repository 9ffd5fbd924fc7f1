"""The .npz answer's zip writer: what np.load and zipfile read, CRCs checked."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest
from sagemaker_tfs.service.codecs import content_types, npz_writer, registry
from sagemaker_tfs.wire import protos, streamed_predict
from sagemaker_tfs.wire.streamed_predict import StreamedTensors


def joined(chunks: list) -> bytes:
    return b"".join(bytes(chunk) for chunk in chunks)


def read_back(data: bytes) -> dict[str, np.ndarray]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert archive.testzip() is None  # every member's CRC-32 checked
    with np.load(io.BytesIO(data), allow_pickle=False) as npz:
        return {name: npz[name] for name in npz.files}


CASES = {
    "mixed": {
        "scores": np.linspace(0, 1, 15, dtype=np.float32).reshape(3, 5),
        "labels": np.arange(6, dtype=np.int64),
        "words": np.array([b"cat", b"dog"], dtype=object),
    },
    "empty arrays": {"none": np.zeros((0, 4), np.float32), "also": np.zeros(0, np.int8)},
    "0-d arrays": {"scalar": np.array(3.5), "flag": np.array(True)},
    "many members": {f"out_{i}": np.full(i, i, np.int16) for i in range(300)},
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_np_load_reads_every_member_back(case: str) -> None:
    arrays = CASES[case]
    chunks, media_type = registry.encode_outputs(arrays, content_types.NPZ)
    assert media_type == content_types.NPZ
    got = read_back(joined(chunks))
    assert list(got) == sorted(arrays)
    for name, array in arrays.items():
        want = array.astype(np.bytes_) if array.dtype == object else array
        assert got[name].dtype == want.dtype and got[name].shape == want.shape
        np.testing.assert_array_equal(got[name], want)


def streamed_npz(arrays: dict, size: int) -> content_types.StreamedBody:
    spec = protos.ModelSpec(name="m")
    messages = streamed_predict.answer_messages(spec, arrays, size=size)
    body, media_type = registry.encode_answer(
        StreamedTensors.receive_answer(messages), content_types.NPZ
    )
    assert media_type == content_types.NPZ and isinstance(body, content_types.StreamedBody)
    return body


@pytest.mark.parametrize("size", [1, 333, 1 << 20])
def test_streamed_answer_passed_on_as_it_arrives(size: int) -> None:
    arrays = {
        "b": np.arange(1000, dtype=np.float32).reshape(10, 100),
        "a": np.arange(7, dtype=np.uint8),
        "empty": np.zeros((0, 2)),
        "words": np.array([b"x", b"yz"], dtype=object),
    }
    body = streamed_npz(arrays, size)
    data = joined(list(body.chunks))
    assert len(data) == body.length  # the Content-Length sent before the data
    got = read_back(data)
    assert list(got) == sorted(arrays)
    for name, array in arrays.items():
        want = array.astype(np.bytes_) if array.dtype == object else array
        np.testing.assert_array_equal(got[name], want)


def test_pieces_are_passed_on_not_copied() -> None:
    """The members' data are views of the messages received, not of copies."""
    arrays = {"x": np.arange(4096, dtype=np.float64)}
    spec = protos.ModelSpec(name="m")
    messages = list(streamed_predict.answer_messages(spec, arrays, size=8192))
    body, _ = registry.encode_answer(StreamedTensors.receive_answer(messages), content_types.NPZ)
    received = {id(message) for message in messages[1:]}
    views = [c for c in body.chunks if isinstance(c, memoryview)]
    assert len(views) == 4 and all(id(view.obj) in received for view in views)


def test_a_truncated_answer_raises_while_sending() -> None:
    spec = protos.ModelSpec(name="m")
    messages = list(streamed_predict.answer_messages(spec, {"x": np.zeros(1000)}, size=1000))
    body = registry.encode_answer(StreamedTensors.receive_answer(messages[:-1]), content_types.NPZ)[
        0
    ]
    with pytest.raises(streamed_predict.StreamError, match="ended after 7000 of the 8000 bytes"):
        joined(list(body.chunks))


def test_pieces_that_do_not_match_the_members_are_an_error() -> None:
    def arriving(size: int) -> list[npz_writer.Member]:
        return [npz_writer.Member("a.npy", b"head", size)]

    with pytest.raises(npz_writer.IncompleteAnswer, match="ended after 3 of its 5 bytes"):
        list(npz_writer.zip_stream(arriving(5), [(0, b"abc")])[1])
    with pytest.raises(npz_writer.IncompleteAnswer, match="has 6 bytes, not 5"):
        list(npz_writer.zip_stream(arriving(5), [(0, b"abc"), (0, b"def")])[1])
    with pytest.raises(npz_writer.IncompleteAnswer, match="goes on after its 1 members"):
        list(npz_writer.zip_stream(arriving(3), [(0, b"abc"), (0, b"d")])[1])


def test_array_bytes_are_referenced_not_copied() -> None:
    array = np.arange(1 << 16, dtype=np.float64)
    chunks, _ = registry.encode_outputs({"x": array}, content_types.NPZ)
    assert any(isinstance(c, memoryview) and np.shares_memory(np.asarray(c), array) for c in chunks)


def members(**data: bytes) -> list[npz_writer.Member]:
    return [npz_writer.Member(f"{name}.npy", b"head", len(d), d) for name, d in data.items()]


def test_zip64_records_read_back() -> None:
    """The ZIP64 branch (taken from 4 GiB on) forced on a small archive."""
    length, chunks = npz_writer.zip_stream(members(a=b"abcdefg", b=b""), [], force_zip64=True)
    data = joined(list(chunks))
    assert len(data) == length
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert archive.testzip() is None
        assert archive.read("a.npy") == b"headabcdefg" and archive.read("b.npy") == b"head"


def test_no_members() -> None:
    length, chunks = npz_writer.zip_stream([], [])
    data = joined(list(chunks))
    assert len(data) == length
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert archive.namelist() == []


def test_a_wrong_crc_is_caught_by_the_reader() -> None:
    """The CRC is really checked: bytes that are not the checksummed ones fail the read."""
    _, chunks = npz_writer.zip_stream(members(a=b"data"), [])
    data = joined(list(chunks)).replace(b"headdata", b"headDATA")
    with zipfile.ZipFile(io.BytesIO(data)) as archive, pytest.raises(zipfile.BadZipFile):
        archive.read("a.npy")


def test_the_crc_in_use_is_zlibs() -> None:
    """zlib-ng's CRC-32 is the one zip readers check."""
    import zlib

    data = np.random.default_rng(0).bytes(100_000)
    assert npz_writer.crc32(data) == zlib.crc32(data)
    assert npz_writer.crc32(data[50:], npz_writer.crc32(data[:50])) == zlib.crc32(data)
