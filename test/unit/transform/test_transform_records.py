"""Splitting streams into records (SplitType) and packing them (BatchStrategy)."""

from __future__ import annotations

import gzip
import io
import struct

import pytest
from sagemaker_tfs.transform import records
from sagemaker_tfs.transform.batching import mini_batches
from sagemaker_tfs.transform.records import RecordError, RecordTooLarge


def recordio_frame(data: bytes) -> bytes:
    """One whole RecordIO record: magic, length, the data padded to 4 bytes (MXNet's format)."""
    return struct.pack("<II", 0xCED7230A, len(data)) + data + b"\0" * (-len(data) % 4)


def split(data: bytes, split_type: str, limit: int = 1 << 20) -> list[bytes]:
    return list(records.split(io.BytesIO(data), split_type, limit))


def test_lines_drop_terminators_and_blank_lines() -> None:
    assert split(b"a,1\r\nb,2\n\n  \nc,3", "Line") == [b"a,1", b"b,2", b"c,3"]


def test_a_line_longer_than_the_payload_fails_without_reading_it_whole() -> None:
    class Counting(io.BytesIO):
        largest = 0

        def readline(self, size: int = -1) -> bytes:  # type: ignore[override]
            Counting.largest = max(Counting.largest, size)
            return super().readline(size)

    stream = Counting(b"short\n" + b"x" * 10_000 + b"\n")
    with pytest.raises(RecordTooLarge, match="record 2 .* over MaxPayloadInMB \\(100 bytes\\)"):
        list(records.split(stream, "Line", 100))
    assert Counting.largest == 102


def test_recordio_records_keep_their_framing_and_padding() -> None:
    data = recordio_frame(b"abc") + recordio_frame(b"") + recordio_frame(b"12345678")
    assert split(data, "RecordIO") == [
        recordio_frame(b"abc"),
        recordio_frame(b""),
        recordio_frame(b"12345678"),
    ]


def test_a_multi_part_recordio_record_stays_one_record() -> None:
    def part(flag: int, data: bytes) -> bytes:
        return (
            struct.pack("<II", 0xCED7230A, (flag << 29) | len(data))
            + data
            + b"\0" * (-len(data) % 4)
        )

    whole = part(1, b"first") + part(2, b"mid") + part(3, b"end")
    assert split(whole + recordio_frame(b"next"), "RecordIO") == [whole, recordio_frame(b"next")]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x01\x02\x03\x04\x05\x00\x00\x00hello\0\0\0", "bad magic number 0x04030201"),
        (recordio_frame(b"abcdefgh")[:-3], "RecordIO record 1: the input ends 3 bytes early"),
        (recordio_frame(b"x")[:5], "RecordIO record 1: truncated header"),
    ],
)
def test_broken_recordio_says_where(data: bytes, message: str) -> None:
    with pytest.raises(RecordError, match=message):
        split(data, "RecordIO")


def test_tfrecords_as_tensorflow_writes_them(tmp_path) -> None:
    tf = pytest.importorskip("tensorflow")
    path = tmp_path / "data.tfrecord"
    payloads = [b"one", b"", b"three" * 1000]
    with tf.io.TFRecordWriter(str(path)) as writer:
        for payload in payloads:
            writer.write(payload)
    found = split(path.read_bytes(), "TFRecord")
    assert [r[12:-4] for r in found] == payloads
    assert b"".join(found) == path.read_bytes()  # framing (length, CRCs) kept byte for byte
    with pytest.raises(RecordError, match="TFRecord 3: the input ends 1 bytes early"):
        split(path.read_bytes()[:-1], "TFRecord")


def test_whole_objects_over_the_payload_are_not_read_whole() -> None:
    assert split(b"\xff\xd8 jpeg", "None") == [b"\xff\xd8 jpeg"]
    stream = io.BytesIO(b"x" * 1000)
    with pytest.raises(RecordTooLarge, match="more than 100 bytes"):
        list(records.split(stream, "None", 100))
    assert stream.tell() == 101


def test_gzip_input_is_decompressed_as_a_stream() -> None:
    data = gzip.compress(b"".join(b"line %d\n" % i for i in range(10_000)))
    stream = records.decompressed(io.BytesIO(data), "Gzip")
    found = list(records.split(stream, "Line", 1000))
    assert len(found) == 10_000 and found[-1] == b"line 9999"


def test_multi_record_packs_whole_records_up_to_the_payload() -> None:
    lines = [b"a" * 30, b"b" * 30, b"c" * 30, b"d" * 10]
    batches = list(mini_batches(lines, "Line", "MultiRecord", 64))
    assert [b.body for b in batches] == [
        b"a" * 30 + b"\n" + b"b" * 30 + b"\n",
        b"c" * 30 + b"\n" + b"d" * 10 + b"\n",
    ]
    assert [(b.first, b.last, b.describe()) for b in batches] == [
        (0, 1, "records 1-2"),
        (2, 3, "records 3-4"),
    ]
    assert all(len(b.body) <= 64 for b in batches)


def test_single_record_sends_each_record_alone() -> None:
    framed = [recordio_frame(b"a"), recordio_frame(b"b")]
    batches = list(mini_batches(framed, "RecordIO", "SingleRecord", 1000))
    assert [b.body for b in batches] == framed
    assert batches[1].describe() == "record 2"


def test_a_record_that_cannot_fit_alone_fails_the_batching() -> None:
    with pytest.raises(RecordTooLarge, match="record 3 is 65 bytes, over MaxPayloadInMB"):
        list(mini_batches([b"a", b"b", b"x" * 64], "Line", "MultiRecord", 64))


def test_the_input_filter_shapes_the_body_but_the_batch_keeps_the_records() -> None:
    (batch,) = mini_batches([b"ab", b"cd"], "Line", "MultiRecord", 100, prepare=bytes.upper)
    assert batch.body == b"AB\nCD\n" and batch.records == [b"ab", b"cd"]


def test_an_input_filter_error_names_the_record() -> None:
    from sagemaker_tfs.transform.filters import DataProcessing, FilterError

    keep_features = DataProcessing.build(
        "application/json", "application/json", "$.features", None, "None"
    ).filter_input
    records = [b'{"features": [1]}', b'{"other": 2}']
    with pytest.raises(FilterError, match=r"^record 2: '\$.features' matches nothing"):
        list(mini_batches(records, "Line", "MultiRecord", 100, prepare=keep_features))
