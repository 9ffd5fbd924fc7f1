"""Packing records into request bodies (mini-batches), as BatchStrategy says.

``SingleRecord`` sends each record alone; ``MultiRecord`` packs as many whole records, in
order, as fit in MaxPayloadInMB. A record that does not fit alone fails the job.

A body is written into one growing buffer as its records come, and the records themselves are
kept only when the output needs them one by one (JoinSource, OutputFilter): a 100 MB CSV of
8.7 million rows is one body of 100 MB, not a list of 8.7 million objects beside it (and
``bytes.join`` over such a list keeps an 80-byte buffer record per item while it joins).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from sagemaker_tfs.transform.records import append_framed, framed_size, record_too_large


@dataclass(frozen=True)
class MiniBatch:
    """Records ``first`` .. ``first + count - 1`` (0-based) of one input object; ``records``:
    them as read, when the batch was asked to keep them (else empty)."""

    first: int
    count: int
    body: bytes
    records: list[bytes]

    @property
    def last(self) -> int:
        return self.first + self.count - 1

    def describe(self) -> str:
        """``record 3`` or ``records 3-9`` (1-based, as a person counts)."""
        if self.count == 1:
            return f"record {self.first + 1}"
        return f"records {self.first + 1}-{self.last + 1}"


def mini_batches(
    records: Iterable[bytes],
    split_type: str,
    strategy: str,
    limit: int,
    prepare: Callable[[bytes], bytes] | None = None,
    keep_records: bool = True,
) -> Iterator[MiniBatch]:
    """``prepare`` (the InputFilter) turns each record into what is sent; with
    ``keep_records`` the batch keeps the records as read (JoinSource needs them)."""
    kept: list[bytes] = []
    body = bytearray()
    count = 0
    first = 0
    for index, record in enumerate(records):
        try:
            to_send = prepare(record) if prepare else record
        except ValueError as error:  # the filter's own error, placed
            raise type(error)(f"record {index + 1}: {error}") from None
        size = framed_size(to_send, split_type)
        if size > limit:
            raise record_too_large(index, size, limit)
        if count and (strategy == "SingleRecord" or len(body) + size > limit):
            batch = MiniBatch(first, count, bytes(body), kept)
            first, count, kept = index, 0, []
            body = bytearray()  # let go of it while the batch is out
            yield batch
        if keep_records:
            kept.append(record)
        append_framed(body, to_send, split_type)
        count += 1
    if count:
        yield MiniBatch(first, count, bytes(body), kept)
