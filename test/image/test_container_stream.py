"""The bidirectional stream in a container of the image under test (conftest.py says what is
substituted): SageMaker's WebSocket at ``/invocations-bidirectional-stream`` on the serving port,
the README's ``stream`` example answering through the model, the protocol's errors closing
only their connection, and a stop closing open streams with 1001."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
from image_scripts import REPO_ROOT, Image, start_container
from local_ports import free_port
from stream_clients import (
    close_of,
    exchange,
    masked_frame,
    open_stream,
    raw_handshake,
    read_close_code,
)

pytestmark = pytest.mark.slow
HALF_PLUS_THREE = REPO_ROOT / "test" / "resources" / "models" / "half_plus_three"
STREAM_EXAMPLE = REPO_ROOT / "examples" / "inference" / "stream" / "code"


def test_stream_example_in_the_container(
    image_under_test: Image, bin_dir: Path, tmp_path: Path
) -> None:
    shutil.copytree(HALF_PLUS_THREE, tmp_path / "half_plus_three")
    shutil.copytree(STREAM_EXAMPLE, tmp_path / "code")
    container = start_container(
        image_under_test, bin_dir, free_port(), tmp_path,
        {"SAGEMAKER_TFS_STREAM_MAX_MESSAGE_MB": "1"},
    )  # fmt: skip
    base_url = container.url("")
    try:
        started = time.monotonic()
        with open_stream(base_url) as connection, open_stream(base_url) as bystander:
            opened = time.monotonic() - started
            assert connection.ping().wait(5)
            messages = [json.dumps({"instances": [float(i), 1.0], "id": i}) for i in range(2000)]
            answers = exchange(connection, messages)
            assert [json.loads(a) for a in answers[:2]] == [
                {"predictions": [3.0, 3.5], "id": 0},
                {"predictions": [3.5, 3.5], "id": 1},
            ]
            assert [json.loads(a)["id"] for a in answers] == list(range(2000))
            binary = exchange(connection, [np.array([2.0, 4.0], "<f4").tobytes()])
            assert np.frombuffer(binary[0], "<f4").tolist() == [4.0, 5.0]
            connection.send(b"x" * ((1 << 20) + 1))
            assert close_of(connection)[0] == 1009
            with raw_handshake(base_url) as sock:
                sock.sendall(masked_frame(0x1, b"\xff"))
                assert read_close_code(sock) == 1007
            first = exchange(bystander, ['{"instances": [1.0]}'])
            assert json.loads(first[0]) == {"predictions": [3.5]}
            bystander.send("not json")
            code, reason = close_of(bystander)
            assert code == 1011 and reason.startswith("stream_handler raised JSONDecodeError")
        assert opened < 2.0, opened
        held = open_stream(base_url).__enter__()
        assert exchange(held, ['{"instances": [0.0]}']) == ['{"predictions": [3.0]}']
        logs = container.logs()  # before the stop, which removes the container
    finally:
        assert container.stop().returncode == 0
    assert close_of(held) == (1001, "the endpoint is stopping")
    assert "stream_handler raised JSONDecodeError at" in logs
