"""``/invocations-bidirectional-stream`` through the whole stack: nginx, the stream server, the
Python model server, with the ``websockets`` client SageMaker's side would be.

One stack serves a test handler (``STREAM_CODE``, its behaviour chosen by the connection's
custom attributes, else by its query string) with small limits: 1 MB messages, a 3 s idle
timeout, 110 connections. The README's example (``examples/inference/stream``) is served by
``test_inference_examples.py``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from stream_clients import (
    close_of,
    exchange,
    masked_frame,
    open_stream,
    raw_handshake,
    read_close_code,
)
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from whole_stack import Stack, running_stack, stack_with_code, wait_for

pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[3]
MODEL = REPO_ROOT / "test" / "resources" / "models" / "half_plus_three"
IDLE_SECONDS = 3
MAX_CONNECTIONS = 110
VARIABLE_PREFIX = "SAGEMAKER_TFS_STREAM_"
LIMITS = {
    "SAGEMAKER_TFS_STREAM_MAX_MESSAGE_MB": "1",
    "SAGEMAKER_TFS_STREAM_IDLE_TIMEOUT_SECONDS": str(IDLE_SECONDS),
    "SAGEMAKER_TFS_STREAM_MAX_CONNECTIONS": str(MAX_CONNECTIONS),
}
# The custom attributes' ``mode`` picks what the handler does; ``echo`` by default.
STREAM_CODE = '''
import json
import os
import time
from urllib.parse import parse_qs


def stream_handler(messages, context):
    attributes = dict(p.split("=", 1) for p in context.custom_attributes.split(",") if "=" in p)
    if not attributes:  # SageMaker's bidirectional API: the caller's choices in the query string
        attributes = {k: v[0] for k, v in parse_qs(context.query_string).items()}
    mode = attributes.get("mode", "echo")
    if mode == "returns-none":
        return None
    if mode == "context":
        return described(messages, attributes, context)
    return MODES[mode](messages, attributes)


def echo(messages, attributes):
    for message in messages:
        if message == "raise":
            raise ValueError("asked to fail")
        yield message


def upper(messages, attributes):
    for message in messages:
        yield message.upper() if isinstance(message, str) else message[::-1]


def wrong_yield(messages, attributes):
    yield 42


def ticks(messages, attributes):
    """Yields until the client goes away, then notes that it was closed."""
    count = 0
    try:
        while True:
            count += 1
            yield f"tick {count}"
            time.sleep(0.01)
    finally:
        with open(attributes["marker"], "w") as marker:
            marker.write(str(count))


def flood(messages, attributes):
    """64 KiB messages without reading any, noting how many it has yielded so far."""
    payload = b"f" * 65536
    count = 0
    while True:
        yield payload
        count += 1
        if count % 16 == 0:  # written aside, then renamed: the test never reads half a file
            with open(attributes["marker"] + ".new", "w") as marker:
                marker.write(str(count))
            os.replace(attributes["marker"] + ".new", attributes["marker"])


def described(messages, attributes, context):
    """What the handler learns of its connection, then an echo."""
    names = ("query_string", "invocation_path", "model_name", "model_version", "method",
             "custom_attributes", "session_id")
    yield json.dumps({name: getattr(context, name) for name in names})
    yield from messages


def busy(messages, attributes):
    """Reads nothing for a while (a long model call), then counts what arrived meanwhile."""
    time.sleep(float(attributes["seconds"]))
    count = 0
    for message in messages:
        if message == "done":
            break
        count += 1
    yield f"read {count}"


MODES = {"echo": echo, "upper": upper, "wrong-yield": wrong_yield, "ticks": ticks, "flood": flood,
         "busy": busy}
'''


def raising_line() -> int:
    return next(
        number
        for number, line in enumerate(STREAM_CODE.splitlines())
        if 'raise ValueError("asked to fail")' in line
    )


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("stream")
    code = root / "code-source"
    code.mkdir()
    (code / "inference.py").write_text(STREAM_CODE)
    with stack_with_code(root, MODEL, code, env=LIMITS) as running:
        yield running


def numbered_messages(count: int) -> list[bytes | str]:
    """Text and binary messages in turn, each different."""
    return [
        f"message {index} é" if index % 2 == 0 else index.to_bytes(4, "little") * 3
        for index in range(count)
    ]


def test_echoes_10000_messages_over_one_connection(stack: Stack) -> None:
    messages = numbered_messages(10_000)
    with open_stream(stack.url) as connection:
        assert exchange(connection, messages) == messages
        connection.close()
    assert connection.close_code == 1000


def test_transforms_10000_messages_over_one_connection(stack: Stack) -> None:
    messages = numbered_messages(10_000)
    with open_stream(stack.url, X_Amzn_SageMaker_Custom_Attributes="mode=upper") as connection:
        answers = exchange(connection, messages)
    expected = [m.upper() if isinstance(m, str) else m[::-1] for m in messages]
    assert answers == expected
    assert answers[0] == "MESSAGE 0 É" and isinstance(answers[1], bytes)


def test_100_concurrent_connections(stack: Stack) -> None:
    count, per_connection = 100, 50
    opened = contextlib.ExitStack()
    connections = [opened.enter_context(open_stream(stack.url)) for _ in range(count)]
    results: dict[int, list[bytes | str]] = {}
    errors: list[BaseException] = []

    def run(index: int) -> None:
        messages = [f"{index}:{n}" for n in range(per_connection)]
        try:
            results[index] = exchange(connections[index], messages)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=run, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    opened.close()
    assert errors == []
    assert all(results[i] == [f"{i}:{n}" for n in range(per_connection)] for i in range(count))


def test_handshake_is_quick_and_ping_is_answered(stack: Stack) -> None:
    started = time.monotonic()
    with open_stream(stack.url) as connection:
        opened = time.monotonic() - started
        assert connection.ping(b"are you there").wait(5)
        connection.send("after the ping")
        assert connection.recv(timeout=10) == "after the ping"
    assert opened < 1.0, opened


def test_oversized_message_closes_that_connection_only(stack: Stack) -> None:
    with open_stream(stack.url) as bystander, open_stream(stack.url) as offender:
        assert exchange(bystander, ["before"]) == ["before"]
        offender.send(b"x" * ((1 << 20) + 1))
        assert close_of(offender)[0] == 1009
        assert exchange(bystander, ["after", b"\x00\x01"]) == ["after", b"\x00\x01"]
        assert exchange(bystander, [b"y" * (1 << 20)]) == [b"y" * (1 << 20)]  # at the limit


def test_text_frame_that_is_not_utf8_closes_that_connection_only(stack: Stack) -> None:
    with open_stream(stack.url) as bystander:
        sock = raw_handshake(stack.url)
        with sock:
            sock.sendall(masked_frame(0x1, b"caf\xc3"))  # a truncated UTF-8 sequence
            assert read_close_code(sock) == 1007
        sock = raw_handshake(stack.url)
        with sock:
            sock.sendall(masked_frame(0x3, b"?"))  # a reserved opcode: a protocol error
            assert read_close_code(sock) == 1002
        assert exchange(bystander, ["still here"]) == ["still here"]


def test_handler_exception_closes_with_1011_and_is_logged(stack: Stack) -> None:
    with open_stream(stack.url) as bystander, open_stream(stack.url) as failing:
        assert exchange(failing, ["one"]) == ["one"]
        failing.send("raise")
        code, reason = close_of(failing)
        assert (code, reason) == (1011, "stream_handler raised ValueError: asked to fail")
        assert exchange(bystander, ["unaffected"]) == ["unaffected"]
    line = f"stream_handler raised ValueError at inference.py:{raising_line() + 1}: asked to fail"
    assert wait_for(lambda: line in stack.log_text(), 10), stack.log_tail()


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("wrong-yield", "stream_handler yielded int: yield bytes or str"),
        ("returns-none", "stream_handler returned NoneType: it must yield its messages"),
    ],
)
def test_handler_that_does_not_yield_messages_closes_with_1011(
    stack: Stack, mode: str, reason: str
) -> None:
    with open_stream(stack.url, X_Amzn_SageMaker_Custom_Attributes=f"mode={mode}") as connection:
        code, text = close_of(connection)
    assert code == 1011 and text.startswith(reason), text


def test_idle_connection_is_closed_and_a_busy_one_is_not(stack: Stack) -> None:
    with open_stream(stack.url) as idle, open_stream(stack.url) as busy:
        started = time.monotonic()
        for n in range(IDLE_SECONDS * 2 + 1):  # a message a second: never idle for 3 s
            assert exchange(busy, [str(n)]) == [str(n)]
            time.sleep(0.5)
        code, reason = close_of(idle)
        waited = time.monotonic() - started
    assert code == 1001
    assert reason == f"no message for {IDLE_SECONDS} s (SAGEMAKER_TFS_STREAM_IDLE_TIMEOUT_SECONDS)"
    assert IDLE_SECONDS - 0.5 < waited < IDLE_SECONDS * 3, waited


def test_a_client_that_leaves_closes_the_generator(stack: Stack, tmp_path: Path) -> None:
    marker = tmp_path / "closed"
    attributes = f"mode=ticks,marker={marker}"
    with open_stream(stack.url, X_Amzn_SageMaker_Custom_Attributes=attributes) as connection:
        assert [connection.recv(timeout=10) for _ in range(3)] == ["tick 1", "tick 2", "tick 3"]
    assert wait_for(marker.exists, 10)
    ticks = int(marker.read_text())
    time.sleep(0.5)
    assert int(marker.read_text()) == ticks  # closed, not drained: no tick after the note


def test_connections_over_the_bound_are_told_to_try_again_later(stack: Stack) -> None:
    opened = contextlib.ExitStack()
    connections = [opened.enter_context(open_stream(stack.url)) for _ in range(MAX_CONNECTIONS)]
    with opened:
        for connection in connections:  # each is served (admitted) before the next test
            assert exchange(connection, ["in"]) == ["in"]
        with open_stream(stack.url) as refused:
            code, reason = close_of(refused)
        assert code == 1013
        assert reason == f"{MAX_CONNECTIONS} streams are open ({VARIABLE_PREFIX}MAX_CONNECTIONS)"
    assert wait_for(lambda: _echoes(stack), 10)


def _echoes(stack: Stack) -> bool:
    try:
        with open_stream(stack.url) as connection:
            return exchange(connection, ["x"]) == ["x"]
    except (ConnectionClosed, InvalidHandshake, OSError):
        return False


def test_refusals_before_the_handshake_are_json(stack: Stack) -> None:
    plain = requests.get(stack.url + "/invocations-bidirectional-stream", timeout=10)
    assert plain.status_code == 426
    assert plain.headers["Upgrade"] == "websocket"
    assert "takes a WebSocket" in plain.json()["error"]
    attributes = "tfs-model-version=a"
    with (
        pytest.raises(InvalidStatus) as refused,
        open_stream(stack.url, X_Amzn_SageMaker_Custom_Attributes=attributes),
    ):
        pass
    response = refused.value.response
    assert response.status_code == 400
    assert json.loads(response.body) == {"error": "Invalid model version: 'a'"}
    no_key = requests.get(
        stack.url + "/invocations-bidirectional-stream",
        headers={"Upgrade": "websocket", "Connection": "Upgrade"},
        timeout=10,
    )
    assert no_key.status_code == 400
    assert "Sec-WebSocket-Key" in no_key.json()["error"]


def test_a_url_that_is_not_ascii_is_refused_with_json(stack: Stack) -> None:
    """nginx passes the URL's bytes as they came: the stream server dropped such a handshake,
    which nginx answered 503."""
    with pytest.raises(ConnectionError) as refused:
        raw_handshake(stack.url, query="q=\xe9").close()
    assert "HTTP/1.1 400" in str(refused.value) and "application/json" in str(refused.value)


def test_the_supervisor_restarts_a_stream_server_that_dies(stack: Stack) -> None:
    (pid,) = stack.child_pids("sagemaker_tfs.service.stream.stream_server")
    with open_stream(stack.url) as connection:
        assert exchange(connection, ["before"]) == ["before"]
        os.kill(pid, signal.SIGKILL)
        assert close_of(connection)[0] in (1006, None, 1011)
    assert wait_for(lambda: _echoes(stack), 30), stack.log_tail()
    (new_pid,) = stack.child_pids("sagemaker_tfs.service.stream.stream_server")
    assert new_pid != pid
    assert stack.ping() == 200


def test_without_stream_handler_the_connection_closes_with_1008(tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    shutil.copytree(MODEL, tmp_path / "model" / MODEL.name)
    (tmp_path / "work").mkdir()
    with running_stack(tmp_path / "model", tmp_path / "work") as stack:
        with open_stream(stack.url) as connection:
            code, reason = close_of(connection)
        assert code == 1008
        assert reason == "no code/inference.py with stream_handler(messages, context)"
        assert stack.post('{"instances": [1.0]}').json() == {"predictions": [3.5]}


def test_stopping_the_stack_closes_open_streams_with_1001(tmp_path: Path) -> None:
    code = tmp_path / "code-source"
    code.mkdir()
    (code / "inference.py").write_text(STREAM_CODE)
    with stack_with_code(tmp_path, MODEL, code) as stack:
        connection = open_stream(stack.url).__enter__()
        assert exchange(connection, ["open"]) == ["open"]
        started = time.monotonic()
        assert stack.stop() == 0
        stopped = time.monotonic() - started
        assert close_of(connection) == (1001, "the endpoint is stopping")
    assert stopped < 10, stopped


def test_invocations_serve_as_without_a_script_beside_a_stream_only_one(stack: Stack) -> None:
    answer = stack.post('{"instances": [1.0, 2.0]}')
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"predictions": [3.5, 4.0]}
    assert "has only stream_handler: /invocations serves without it" in stack.log_text()


def test_a_client_that_does_not_read_holds_the_handler_back(stack: Stack, tmp_path: Path) -> None:
    """Nothing buffers without bound: once the sockets between are full, the handler's next
    yield waits for the client."""
    marker = tmp_path / "yielded"
    attributes = f"mode=flood,marker={marker}"
    with open_stream(stack.url, X_Amzn_SageMaker_Custom_Attributes=attributes) as connection:
        assert wait_for(marker.exists, 10)
        time.sleep(2)
        held = int(marker.read_text())
        time.sleep(2)
        assert int(marker.read_text()) == held
        assert held * 65536 < 64 << 20, held  # what the sockets on the way hold
        for _ in range(held + 64):  # reading lets it go on
            assert connection.recv(timeout=10) == b"f" * 65536
        assert int(marker.read_text()) > held
