"""The ``application/x-npz`` answer: a zip of ``.npy`` members written around the arrays.

What ``np.savez`` writes (members stored uncompressed, ZIP64 records where sizes or offsets
need them), but as a list of chunks that refer to the arrays' buffers instead of copying
them, and with each member's CRC-32 taken from the pieces of the answer as they arrive
from the model server (``streamed_predict.StreamedTensors.pieces``): for an answer of tens of
MB the checksum is a fifth of the service's work, and it then runs while the rest of the
answer is still on its way. zipfile would copy nothing either, but checksums only at the end.
"""

from __future__ import annotations

import dataclasses
import struct
import zlib
from collections.abc import Iterable, Mapping, Sequence

Chunk = bytes | memoryview

_LOCAL = struct.Struct("<IHHHHHIIIHH")
_CENTRAL = struct.Struct("<IHHHHHHIIIHHHHHII")
_END = struct.Struct("<IHHHHIIH")
_END64 = struct.Struct("<IQHHIIQQQQ")
_LOCATOR64 = struct.Struct("<IIQI")
_LOCAL_SIGNATURE, _CENTRAL_SIGNATURE = 0x04034B50, 0x02014B50
_END_SIGNATURE, _END64_SIGNATURE, _LOCATOR64_SIGNATURE = 0x06054B50, 0x06064B50, 0x07064B50
_ZIP64_EXTRA = 0x0001
_VERSION, _VERSION64 = 20, 45  # 2.0: stored files; 4.5: ZIP64
_MAX32, _MAX16 = 0xFFFFFFFF, 0xFFFF
_DOS_DATE = (0 << 11) | (1 << 5) | 1  # 1980-01-01 00:00, as np.savez writes


@dataclasses.dataclass
class Member:
    """One ``.npy`` member: its name in the archive and its bytes as chunks."""

    name: str
    chunks: Sequence[Chunk]
    crc: int = 0
    offset: int = 0

    @property
    def size(self) -> int:
        return sum(len(chunk) for chunk in self.chunks)


def checksum(members: Sequence[Member], arrived: Iterable[tuple[int, Chunk]]) -> None:
    """Set each member's CRC-32: ``arrived`` gives ``(member index, bytes)`` for the
    members' last chunks in order (the array data, as it lands); every other chunk is
    checksummed here."""
    covered: set[int] = set()
    for member in members:
        member.crc = _crc(member.chunks[:-1], 0)
    for index, data in arrived:
        members[index].crc = zlib.crc32(data, members[index].crc)
        covered.add(index)
    for index, member in enumerate(members):
        if index not in covered:
            member.crc = _crc(member.chunks[-1:], member.crc)


def _crc(chunks: Iterable[Chunk], crc: int) -> int:
    for chunk in chunks:
        crc = zlib.crc32(chunk, crc)
    return crc


def zip_chunks(members: Sequence[Member], force_zip64: bool = False) -> list[Chunk]:
    """The archive of ``members`` (checksummed) as chunks: headers around their chunks."""
    out: list[Chunk] = []
    offset = 0
    for member in members:
        member.offset = offset
        header = _local_header(member, force_zip64)
        out.append(header)
        out.extend(member.chunks)
        offset += len(header) + member.size
    directory = [_central_header(member, force_zip64) for member in members]
    out.extend(directory)
    out.append(_end_records(len(members), offset, sum(map(len, directory)), force_zip64))
    return out


def _local_header(member: Member, force_zip64: bool) -> bytes:
    name = member.name.encode("utf-8")
    size = member.size
    if size < _MAX32 and not force_zip64:
        fields = (_VERSION, 0, 0, 0, _DOS_DATE, member.crc, size, size, len(name), 0)
        return _LOCAL.pack(_LOCAL_SIGNATURE, *fields) + name
    extra = struct.pack("<HHQQ", _ZIP64_EXTRA, 16, size, size)
    fields = (_VERSION64, 0, 0, 0, _DOS_DATE, member.crc, _MAX32, _MAX32, len(name), len(extra))
    return _LOCAL.pack(_LOCAL_SIGNATURE, *fields) + name + extra


def _central_header(member: Member, force_zip64: bool) -> bytes:
    name = member.name.encode("utf-8")
    size, offset = member.size, member.offset
    values: list[int] = []  # the ZIP64 extra holds those that do not fit, in this order
    if size >= _MAX32 or force_zip64:
        values += [size, size]
        size_field = _MAX32
    else:
        size_field = size
    if offset >= _MAX32 or force_zip64:
        values.append(offset)
        offset = _MAX32
    extra = struct.pack(f"<HH{len(values)}Q", _ZIP64_EXTRA, 8 * len(values), *values)
    extra = extra if values else b""
    version = _VERSION64 if values else _VERSION
    return (
        _CENTRAL.pack(
            _CENTRAL_SIGNATURE, version, version, 0, 0, 0, _DOS_DATE, member.crc,
            size_field, size_field, len(name), len(extra), 0, 0, 0, 0, offset,
        )  # fmt: skip
        + name
        + extra
    )


def _end_records(count: int, directory_offset: int, directory_size: int, force: bool) -> bytes:
    """The end of central directory record, after the ZIP64 ones when anything overflows."""
    fits = count < _MAX16 and directory_offset < _MAX32 and directory_size < _MAX32
    if fits and not force:
        return _END.pack(_END_SIGNATURE, 0, 0, count, count, directory_size, directory_offset, 0)
    end64_offset = directory_offset + directory_size
    end64 = _END64.pack(
        _END64_SIGNATURE, _END64.size - 12, _VERSION64, _VERSION64, 0, 0,
        count, count, directory_size, directory_offset,
    )  # fmt: skip
    locator = _LOCATOR64.pack(_LOCATOR64_SIGNATURE, 0, end64_offset, 1)
    end = _END.pack(
        _END_SIGNATURE, 0, 0, min(count, _MAX16), min(count, _MAX16),
        min(directory_size, _MAX32), min(directory_offset, _MAX32), 0,
    )  # fmt: skip
    return end64 + locator + end


def npz_members(npy_chunks: Mapping[str, Sequence[Chunk]]) -> list[Member]:
    """One member ``NAME.npy`` per output, from its ``.npy`` chunks (header, data)."""
    return [Member(f"{name}.npy", chunks) for name, chunks in npy_chunks.items()]
