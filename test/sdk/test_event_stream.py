"""The stand-in's event-stream framing read by botocore's own decoder and parser, as the
SDK's ``predict_stream`` reads SageMaker's."""

from __future__ import annotations

import botocore.session
import pytest
from botocore.eventstream import EventStream, EventStreamBuffer
from botocore.exceptions import EventStreamError
from botocore.parsers import EventStreamJSONParser
from event_stream import model_stream_error, payload_part


def decoded(stream: bytes) -> list:
    buffer = EventStreamBuffer()
    buffer.add_data(stream)
    return list(buffer)


def parsed_events(stream: bytes) -> EventStream:
    model = botocore.session.get_session().get_service_model("sagemaker-runtime")
    output = model.operation_model("InvokeEndpointWithResponseStream").output_shape
    shape = output.members["Body"]
    raw = type("Raw", (), {"stream": lambda self: iter([stream])})()
    return EventStream(raw, shape, EventStreamJSONParser(), "InvokeEndpointWithResponseStream")


def test_messages_decode_with_their_checksums() -> None:
    messages = decoded(payload_part(b"first") + payload_part(b"") + payload_part(b"\x00" * 5000))
    assert [m.payload for m in messages] == [b"first", b"", b"\x00" * 5000]
    assert messages[0].headers[":event-type"] == "PayloadPart"


def test_payload_parts_and_a_model_stream_error_as_the_sdk_sees_them() -> None:
    events = iter(parsed_events(payload_part(b"one\n") + model_stream_error("cut short")))
    assert next(events) == {"PayloadPart": {"Bytes": b"one\n"}}
    with pytest.raises(EventStreamError) as raised:
        next(events)
    assert raised.value.response["Error"] == {"Code": "ModelStreamError", "Message": "cut short"}


def test_a_corrupted_message_is_refused() -> None:
    corrupted = bytearray(payload_part(b"payload"))
    corrupted[-6] ^= 1
    with pytest.raises(Exception, match="(?i)checksum|crc"):
        decoded(bytes(corrupted))
