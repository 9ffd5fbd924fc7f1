"""The .npz answer's zip writer: what np.load and zipfile read, CRCs checked."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest
from sagemaker_tfs.service import npz_writer, payloads
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
    chunks, media_type = payloads.encode_outputs(arrays, payloads.NPZ)
    assert media_type == payloads.NPZ
    got = read_back(joined(chunks))
    assert list(got) == list(arrays)
    for name, array in arrays.items():
        want = array.astype(np.bytes_) if array.dtype == object else array
        assert got[name].dtype == want.dtype and got[name].shape == want.shape
        np.testing.assert_array_equal(got[name], want)


def test_checksummed_from_the_pieces_of_a_streamed_predict() -> None:
    arrays = {"a": np.arange(1000, dtype=np.float32), "b": np.arange(7, dtype=np.uint8)}
    spec = protos.ModelSpec(name="m")
    messages = streamed_predict.answer_messages(spec, arrays, size=333)
    chunks, _ = payloads.encode_answer(StreamedTensors.receive_answer(messages), payloads.NPZ)
    got = read_back(joined(chunks))
    for name, array in arrays.items():
        np.testing.assert_array_equal(got[name], array)


def test_array_bytes_are_referenced_not_copied() -> None:
    array = np.arange(1 << 16, dtype=np.float64)
    chunks, _ = payloads.encode_outputs({"x": array}, payloads.NPZ)
    assert any(isinstance(c, memoryview) and np.shares_memory(np.asarray(c), array) for c in chunks)


def test_zip64_records_read_back() -> None:
    """The ZIP64 branch (taken from 4 GiB on) forced on a small archive."""
    members = npz_writer.npz_members({"a": [b"abc", b"defg"], "b": [b"", b"xyz"]})
    npz_writer.checksum(members, [])
    data = joined(npz_writer.zip_chunks(members, force_zip64=True))
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert archive.testzip() is None
        assert archive.read("a.npy") == b"abcdefg" and archive.read("b.npy") == b"xyz"


def test_a_wrong_crc_is_caught_by_the_reader() -> None:
    """The CRC is really checked: a corrupted one makes zipfile refuse the member."""
    members = npz_writer.npz_members({"a": [b"head", b"data"]})
    npz_writer.checksum(members, [(0, b"DATA")])  # checksummed bytes that are not the member's
    data = joined(npz_writer.zip_chunks(members))
    with zipfile.ZipFile(io.BytesIO(data)) as archive, pytest.raises(zipfile.BadZipFile):
        archive.read("a.npy")
