"""The bidirectional stream as SageMaker's ``InvokeEndpointWithBidirectionalStream`` drives it:
no custom attributes, content type or session (the API has none of them), the caller's
``ModelQueryString`` as the URL's query string, another path named by
``X-Amzn-SageMaker-Model-Invocation-Path``, binary frames (no ``DataType``) and fragmented
messages, pings from both sides, and a handler that is busy while audio keeps arriving.

The stack serves ``test_bidirectional_stream.STREAM_CODE`` (its mode chosen by the query
string here) with the same small limits, and pings its clients every 2 s.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import requests
from stream_clients import exchange, open_stream, raw_handshake, read_close_code
from test_bidirectional_stream import LIMITS, MODEL, STREAM_CODE
from websockets.exceptions import InvalidStatus
from websockets.sync.client import ClientConnection
from whole_stack import Stack, stack_with_code

pytestmark = pytest.mark.slow

PATH_HEADER = "X_Amzn_SageMaker_Model_Invocation_Path"
KEEPALIVE_SECONDS = 2
# What a voice agent passes as ModelQueryString.
VOICE_QUERY = "voice=alto&sample_rate=16000"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("stream-sagemaker")
    code = root / "code-source"
    code.mkdir()
    (code / "inference.py").write_text(STREAM_CODE)
    env = {**LIMITS, "SAGEMAKER_TFS_STREAM_KEEPALIVE_SECONDS": str(KEEPALIVE_SECONDS)}
    with stack_with_code(root, MODEL, code, env=env) as running:
        yield running


@contextmanager
def described(
    stack: Stack, path: str = "/invocations-bidirectional-stream", **headers: str
) -> Iterator[tuple[dict, ClientConnection]]:
    """The handler's view of a stream opened with ``VOICE_QUERY``, and the connection."""
    with open_stream(stack.url, path, f"mode=context&{VOICE_QUERY}", **headers) as connection:
        yield json.loads(connection.recv(timeout=30)), connection


def test_the_handler_reads_the_query_string_and_path_without_custom_attributes(
    stack: Stack,
) -> None:
    with described(stack) as (seen, connection):
        assert exchange(connection, ["after"]) == ["after"]
    assert seen == {
        "query_string": f"mode=context&{VOICE_QUERY}",
        "invocation_path": "invocations-bidirectional-stream",
        "model_name": "half_plus_three",  # the endpoint's model, its latest version
        "model_version": None,
        "method": "predict",
        "custom_attributes": "",
        "session_id": None,
    }


def test_a_stream_on_the_path_the_header_names_is_served(stack: Stack) -> None:
    with described(stack, "/v1/speak", **{PATH_HEADER: "v1/speak"}) as (seen, connection):
        assert exchange(connection, ["spoken", b"\x00\x01"]) == ["spoken", b"\x00\x01"]
    assert (seen["invocation_path"], seen["query_string"]) == (
        "v1/speak",
        f"mode=context&{VOICE_QUERY}",
    )


@pytest.mark.parametrize(
    ("path", "named"),
    [("/v1/speak", None), ("/v1/speak", "v1/listen"), ("/v1/speak/x", "v1/speak")],
)
def test_a_path_the_header_does_not_name_is_a_404(
    stack: Stack, path: str, named: str | None
) -> None:
    headers = {PATH_HEADER: named} if named else {}
    with pytest.raises(InvalidStatus) as refused, open_stream(stack.url, path, **headers):
        pass
    assert refused.value.response.status_code == 404
    assert json.loads(refused.value.response.body) == {"error": "Not Found"}


def test_a_plain_request_on_the_named_path_is_told_to_upgrade(stack: Stack) -> None:
    answer = requests.get(
        stack.url + "/v1/speak",
        headers={"X-Amzn-SageMaker-Model-Invocation-Path": "v1/speak"},
        timeout=10,
    )
    assert answer.status_code == 426 and "takes a WebSocket" in answer.json()["error"]
    assert answer.headers["Upgrade"] == "websocket"


@pytest.mark.parametrize(
    "path", ["/ping", "/invocations", "/execution-parameters", "/tfs/v1/models/half_plus_three"]
)
def test_the_header_cannot_turn_the_containers_own_routes_into_streams(
    stack: Stack, path: str
) -> None:
    """Each keeps its own answer to a GET, whatever the header names."""
    plain = requests.get(stack.url + path, timeout=10)
    with pytest.raises(InvalidStatus) as refused, open_stream(
        stack.url, path, **{PATH_HEADER: path[1:]}
    ):
        pass
    assert refused.value.response.status_code == plain.status_code != 101


def test_binary_frames_without_a_data_type_and_fragmented_messages(stack: Stack) -> None:
    """SageMaker sends a PayloadPart without DataType as a binary frame, and PARTIAL ...
    COMPLETE parts as one message in fragments (continuation frames): each arrives whole."""
    with open_stream(stack.url) as connection:
        assert exchange(connection, [b'{"instances": [1.0]}', b"\xff\x00"]) == [
            b'{"instances": [1.0]}',
            b"\xff\x00",
        ]
        connection.send(["Hello ", "Wörld", "!"])  # a text frame, then continuation frames
        assert connection.recv(timeout=30) == "Hello Wörld!"
        connection.send([b"\x00" * 70_000, b"\x01", b"\x02" * 3])
        assert connection.recv(timeout=30) == b"\x00" * 70_000 + b"\x01" + b"\x02" * 3


def test_a_handler_busy_for_90_s_keeps_its_stream_while_the_client_sends_and_pings(
    stack: Stack,
) -> None:
    """A long model call while audio keeps arriving: the client sends a message a second and
    pings every 5 s (giving up after 5 s without a pong); the stream server pings every 2 s."""
    seconds = 90
    with open_stream(stack.url, query=f"mode=busy&seconds={seconds}", keepalive=5) as connection:
        started = time.monotonic()
        sent = 0
        while time.monotonic() - started < seconds + 2:
            connection.send(f"chunk {sent}")
            sent += 1
            time.sleep(1)
        connection.send("done")
        assert connection.recv(timeout=30) == f"read {sent}"
        assert connection.close_code is None  # still open
    assert connection.close_code == 1000


def test_a_client_that_stops_answering_pings_is_closed(stack: Stack) -> None:
    """A client that is gone (here: one that reads but never answers a ping) is closed with 1011
    after a ping interval and the time it had to answer (SAGEMAKER_TFS_STREAM_KEEPALIVE_SECONDS
    each), while its handler is busy and does not read."""
    sock = raw_handshake(stack.url, timeout=60, query="mode=busy&seconds=30")
    with sock:
        started = time.monotonic()
        assert read_close_code(sock) == 1011
        waited = time.monotonic() - started
    assert 2 * KEEPALIVE_SECONDS - 0.5 < waited < 2 * KEEPALIVE_SECONDS + 5, waited


def test_the_stack_reads_no_key_of_the_query_string(stack: Stack) -> None:
    """``tfs-model-version=a`` would be a 400 in the custom attributes; in the query string it
    is the handler's own."""
    query = "mode=context&tfs-model-version=a&tfs-model-name=nothing"
    with open_stream(stack.url, query=query) as connection:
        seen = json.loads(connection.recv(timeout=30))
    assert (seen["query_string"], seen["model_name"], seen["model_version"]) == (
        query,
        "half_plus_three",
        None,
    )


def test_without_sessions_a_session_header_is_a_400_on_the_njs_path(stack: Stack) -> None:
    """Here /invocations is the njs's (the script has only stream_handler): nginx refuses."""
    headers = {"X-Amzn-SageMaker-Session-Id": "NEW_SESSION"}
    refused = stack.post('{"instances": [1.0]}', **headers)
    assert refused.status_code == 400
    assert "stateful sessions are off" in refused.json()["error"]
    assert stack.post('{"instances": [1.0]}').json() == {"predictions": [3.5]}
