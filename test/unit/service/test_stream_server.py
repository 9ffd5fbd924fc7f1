"""stream_server's pure parts: the handshake read as an invocation, what a missing handler's
close says; the server itself runs in test/integration/stack/test_bidirectional_stream.py."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from sagemaker_tfs.config import load_config
from sagemaker_tfs.service.stream import stream_server
from sagemaker_tfs.service.stream.stream_server import missing_handler_reason, parse_handshake
from sagemaker_tfs.wire.errors import HttpError
from websockets.datastructures import Headers


def test_the_handshake_reads_as_an_invocation() -> None:
    headers = Headers(
        [
            ("X-Amzn-SageMaker-Custom-Attributes", "tfs-model-version=7, tfs-method=regress, a=b"),
            ("Content-Type", "Application/JSON; charset=utf-8"),
            ("Accept", "text/csv"),
        ]
    )
    parsed = parse_handshake(headers, "half_plus_three")
    assert (parsed.target.model_name, parsed.target.model_version) == ("half_plus_three", "7")
    assert parsed.target.method == "regress"
    assert parsed.content_type.name == "application/json"
    assert parsed.answer.handler == "text/csv" and parsed.content_length == 0
    assert parsed.custom_attributes.header == "tfs-model-version=7, tfs-method=regress, a=b"


def test_a_handshake_without_headers_takes_the_defaults() -> None:
    parsed = parse_handshake(Headers(), "m")
    assert parsed.content_type.name == "application/json" and parsed.accept == ()
    assert parsed.target.model_version is None and parsed.target.method == "predict"


def test_a_bad_custom_attribute_is_a_400() -> None:
    headers = Headers([("X-Amzn-SageMaker-Custom-Attributes", "tfs-method=train")])
    with pytest.raises(HttpError) as refused:
        parse_handshake(headers, "m")
    assert refused.value.status == 400 and "Invalid method" in refused.value.message


def test_the_missing_handler_is_named(tmp_path: Path) -> None:
    assert missing_handler_reason(None) == (
        "no code/inference.py with stream_handler(messages, context)"
    )
    (tmp_path / "inference.py").write_text("def handler(d, c): return 1\n")
    assert missing_handler_reason(str(tmp_path)) == (
        "code/inference.py has no stream_handler(messages, context)"
    )


def test_the_handshake_does_not_read_an_invocations_session_or_arrival() -> None:
    """Headers that mean nothing to a stream are not read, even when given twice."""
    headers = Headers(
        [
            ("X-Amzn-SageMaker-Session-Id", "0-ab"),
            ("X-Amzn-SageMaker-Session-Id", "0-cd"),
            ("X-SageMaker-TFS-Arrival", "1 2"),
        ]
    )
    parsed = parse_handshake(headers, "m")
    assert parsed.session_id is None and parsed.arrival is None


def test_the_stop_signal_is_taken_before_the_first_stream_is_served(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, resources_dir: Path
) -> None:
    """A SIGTERM while the first streams are served closes them with 1001: its handler is in
    place before the server accepts (it was installed after, and a stop in that window ended
    the process by the signal's default action: streams cut without their close frame)."""
    config = load_config({}, model_dir=str(resources_dir / "models"), work_dir=str(tmp_path))
    handlers_when_serving: list[object] = []
    shutdowns: list[tuple[int, str]] = []

    class Server:
        def serve_forever(self) -> None:
            deadline = time.monotonic() + 10
            while signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
                assert time.monotonic() < deadline
                time.sleep(0.01)
            os.kill(os.getpid(), signal.SIGTERM)  # the supervisor's stop, as streams are served

        def shutdown(self, code: int, reason: str) -> None:
            shutdowns.append((code, reason))

    def start_server(service: object, sock: object) -> Server:
        handlers_when_serving.append(signal.getsignal(signal.SIGTERM))
        return Server()

    monkeypatch.setattr(stream_server.StackConfig, "load", staticmethod(lambda path: config))
    monkeypatch.setattr(stream_server, "load_service", lambda config: SimpleNamespace(handler=None))
    monkeypatch.setattr(stream_server, "listen_unix", lambda path: None)
    monkeypatch.setattr(stream_server, "start_server", start_server)
    previous = {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT)}
    try:
        assert stream_server.main({stream_server.STACK_CONFIG_ENV: "unused"}) == 0
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    assert handlers_when_serving != [signal.SIG_DFL]
    assert shutdowns == [(1001, stream_server.SHUTDOWN_REASON)]
