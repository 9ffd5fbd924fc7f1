"""AWS's event-stream framing (``application/vnd.amazon.eventstream``), what SageMaker's
``InvokeEndpointWithResponseStream`` answers and botocore decodes: each message is a prelude
(total length, headers length, the prelude's CRC-32), string headers, the payload and the
CRC-32 of everything before it; integers big-endian.

Written from the framing's public description for the runtime front stand-in
(``runtime_front.py``); ``test_event_stream.py`` checks it against botocore's own decoder.
"""

from __future__ import annotations

import json
import struct
import zlib

STRING_HEADER = 7  # the header value type of a UTF-8 string
CONTENT_TYPE = "application/vnd.amazon.eventstream"


def message(headers: dict[str, str], payload: bytes) -> bytes:
    encoded = b"".join(_header(name, value) for name, value in headers.items())
    total = 4 + 4 + 4 + len(encoded) + len(payload) + 4
    prelude = struct.pack(">II", total, len(encoded))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + encoded + payload
    return body + struct.pack(">I", zlib.crc32(body))


def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    return (
        struct.pack(">B", len(raw_name)) + raw_name
        + struct.pack(">BH", STRING_HEADER, len(raw_value)) + raw_value
    )  # fmt: skip


def payload_part(data: bytes) -> bytes:
    """A ``PayloadPart`` event carrying ``data`` (its ``Bytes``)."""
    headers = {
        ":event-type": "PayloadPart",
        ":message-type": "event",
        ":content-type": "application/octet-stream",
    }
    return message(headers, data)


def model_stream_error(text: str, code: str = "StreamBroken") -> bytes:
    """A ``ModelStreamError`` exception event (botocore raises it as ``EventStreamError``)."""
    headers = {
        ":exception-type": "ModelStreamError",
        ":message-type": "exception",
        ":content-type": "application/json",
    }
    return message(headers, json.dumps({"Message": text, "ErrorCode": code}).encode())
