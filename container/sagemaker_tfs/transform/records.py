"""Splitting an input stream into records, as Batch Transform's SplitType does.

Every reader takes a binary stream and yields records as ``bytes``, reading a bounded amount
at a time (never the whole object). A record keeps the framing it is sent with:

- ``Line``: one line, without its ``\\n`` (or ``\\r\\n``); empty lines are skipped. Bodies
  are the records each followed by ``\\n``.
- ``RecordIO``: one MXNet RecordIO record with its header and padding (magic
  ``0xced7230a``, then a little-endian uint32 whose top 3 bits are the continuation flag and
  low 29 bits the length, then the data padded to 4 bytes). A record split over several
  parts (flags 1, 2, 3) stays one record. Bodies are the framed records concatenated.
- ``TFRecord``: one TFRecord (uint64 length, uint32 masked CRC of the length, the data,
  uint32 masked CRC of the data), framing kept. Lengths are checked, CRCs are not (that
  needs CRC32C, which the standard library lacks; TensorFlow checks them when it reads).
- ``None``: the whole object is one record (read up to ``limit`` bytes plus one, so an
  object over MaxPayloadInMB fails without being read whole).
"""

from __future__ import annotations

import gzip
import struct
from collections.abc import Iterator
from typing import BinaryIO

READ_CHUNK_BYTES = 1 << 20
RECORDIO_MAGIC = 0xCED7230A
_RECORDIO_HEADER = struct.Struct("<II")
_TFRECORD_HEADER = struct.Struct("<QI")
_TFRECORD_FOOTER_BYTES = 4


class RecordError(ValueError):
    """The input is not framed as its SplitType says; the message says where."""


class RecordTooLarge(RecordError):
    """One record is larger than MaxPayloadInMB."""


def decompressed(stream: BinaryIO, compression: str) -> BinaryIO:
    """``Gzip`` input read through a streaming decompressor."""
    if compression == "Gzip":
        return gzip.GzipFile(fileobj=stream, mode="rb")  # type: ignore[return-value]
    return stream


def split(stream: BinaryIO, split_type: str, limit: int) -> Iterator[bytes]:
    """The records of ``stream``; a record over ``limit`` bytes raises ``RecordTooLarge``."""
    if split_type == "Line":
        return lines(stream, limit)
    if split_type == "RecordIO":
        return recordio_records(stream, limit)
    if split_type == "TFRecord":
        return tfrecord_records(stream, limit)
    return whole_object(stream, limit)


def record_too_large(index: int, size: int | str, limit: int) -> RecordTooLarge:
    return RecordTooLarge(
        f"record {index + 1} is {size} bytes, over MaxPayloadInMB ({limit} bytes): "
        "raise --max-payload-mb (at most 100) or split the input"
    )


def whole_object(stream: BinaryIO, limit: int) -> Iterator[bytes]:
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise record_too_large(0, f"more than {limit}", limit)
    yield data


def lines(stream: BinaryIO, limit: int) -> Iterator[bytes]:
    """The non-empty lines; one not ended within ``limit`` + 2 bytes fails unread."""
    index = 0
    while True:
        line = stream.readline(limit + 2)  # room for "\r\n" after a line of exactly `limit`
        if not line:
            return
        if not line.endswith(b"\n") and len(line) == limit + 2:
            raise record_too_large(index, f"more than {limit}", limit)
        record = line.rstrip(b"\r\n")
        if record.strip():
            yield record
            index += 1


def _read_exactly(stream: BinaryIO, size: int, what: str) -> bytes:
    parts, missing = [], size
    while missing:
        chunk = stream.read(min(missing, READ_CHUNK_BYTES))
        if not chunk:
            raise RecordError(f"{what}: the input ends {missing} bytes early (truncated?)")
        parts.append(chunk)
        missing -= len(chunk)
    return b"".join(parts)


def recordio_records(stream: BinaryIO, limit: int) -> Iterator[bytes]:
    index = 0
    while True:
        header = stream.read(_RECORDIO_HEADER.size)
        if not header:
            return
        parts: list[bytes] = []
        size = 0
        while True:
            where = f"RecordIO record {index + 1}"
            if len(header) < _RECORDIO_HEADER.size:
                raise RecordError(f"{where}: truncated header")
            magic, lrecord = _RECORDIO_HEADER.unpack(header)
            if magic != RECORDIO_MAGIC:
                raise RecordError(f"{where}: bad magic number {magic:#010x} (not RecordIO?)")
            flag, length = lrecord >> 29, lrecord & ((1 << 29) - 1)
            padded = (length + 3) & ~3
            size += _RECORDIO_HEADER.size + padded
            if size > limit:
                raise record_too_large(index, f"at least {size}", limit)
            parts.append(header + _read_exactly(stream, padded, where))
            if flag in (0, 3):  # a whole record, or the last part of one
                break
            header = stream.read(_RECORDIO_HEADER.size)
        yield b"".join(parts)
        index += 1


def tfrecord_records(stream: BinaryIO, limit: int) -> Iterator[bytes]:
    index = 0
    while True:
        header = stream.read(_TFRECORD_HEADER.size)
        if not header:
            return
        where = f"TFRecord {index + 1}"
        if len(header) < _TFRECORD_HEADER.size:
            raise RecordError(f"{where}: truncated header")
        length, _ = _TFRECORD_HEADER.unpack(header)
        size = _TFRECORD_HEADER.size + length + _TFRECORD_FOOTER_BYTES
        if size > limit:
            raise record_too_large(index, size, limit)
        yield header + _read_exactly(stream, length + _TFRECORD_FOOTER_BYTES, where)
        index += 1


def append_framed(body: bytearray, record: bytes, split_type: str) -> None:
    """``record`` added to a request body as it is sent (a Line record followed by ``\n``)."""
    body += record
    if split_type == "Line":
        body += b"\n"


def framed_size(record: bytes, split_type: str) -> int:
    """What ``record`` adds to a body."""
    return len(record) + 1 if split_type == "Line" else len(record)
