"""Packing records into request bodies (mini-batches), as BatchStrategy says.

``SingleRecord`` sends each record alone; ``MultiRecord`` packs as many whole records, in
order, as fit in MaxPayloadInMB. A record that does not fit alone fails the job.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from sagemaker_tfs.transform.records import RecordTooLarge, body_of, framed_size


@dataclass(frozen=True)
class MiniBatch:
    """Records ``first`` .. ``first + len(records) - 1`` (0-based) of one input object."""

    first: int
    records: list[bytes]
    body: bytes

    @property
    def last(self) -> int:
        return self.first + len(self.records) - 1

    def describe(self) -> str:
        """``record 3`` or ``records 3-9`` (1-based, as a person counts)."""
        if len(self.records) == 1:
            return f"record {self.first + 1}"
        return f"records {self.first + 1}-{self.last + 1}"


def mini_batches(
    records: Iterable[bytes],
    split_type: str,
    strategy: str,
    limit: int,
    prepare: Callable[[bytes], bytes] | None = None,
) -> Iterator[MiniBatch]:
    """``prepare`` (the InputFilter) turns each record into what is sent; the batch keeps
    the records as read (JoinSource needs them)."""
    pending: list[bytes] = []
    sent: list[bytes] = []
    pending_size = 0
    first = 0
    for index, record in enumerate(records):
        try:
            to_send = prepare(record) if prepare else record
        except ValueError as error:  # the filter's own error, placed
            raise type(error)(f"record {index + 1}: {error}") from None
        size = framed_size(to_send, split_type)
        if size > limit:
            raise RecordTooLarge(
                f"record {index + 1} is {size} bytes, over MaxPayloadInMB ({limit} bytes): "
                "raise --max-payload-mb (at most 100) or split the input"
            )
        if pending and (strategy == "SingleRecord" or pending_size + size > limit):
            yield MiniBatch(first, pending, body_of(sent, split_type))
            first, pending, sent, pending_size = index, [], [], 0
        pending.append(record)
        sent.append(to_send)
        pending_size += size
    if pending:
        yield MiniBatch(first, pending, body_of(sent, split_type))
