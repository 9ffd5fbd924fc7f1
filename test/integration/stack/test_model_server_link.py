"""How the service reaches the model server: over its UNIX socket (``--grpc_socket_path``),
and the streamed answer with its fallback to Predict, through the whole stack.

The model server is a stand-in ``tensorflow_model_server`` on PATH (the supervisor prefers
that binary, as it prefers TF Serving's): our model server, started with what the test
changes. ``moved_tcp_port`` listens for gRPC on another TCP port than the one the
supervisor gave it, so the service can only reach it over the socket; ``no_streamed_predict``
lacks the project's streamed Predict, as TF Serving's binary does; ``cut_answers`` ends every
streamed answer one piece early, as a model server dying mid-answer would.
"""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import requests
from PIL import Image
from whole_stack import RunningStack, running_stack

MODELS = ("detector",)
pytestmark = pytest.mark.slow

STAND_IN = """\
import re, socket, sys
import grpc
from sagemaker_tfs.model_server.grpc import server as grpc_server
from sagemaker_tfs.model_server.main import main

args = sys.argv[1:]
if {moved_tcp_port}:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    args = [re.sub(r"^--port=\\d+$", f"--port={{free}}", arg) for arg in args]
if {cut_answers}:
    from sagemaker_tfs.wire import streamed_predict

    whole_answer = streamed_predict.answer_messages
    streamed_predict.answer_messages = lambda *a, **k: list(whole_answer(*a, **k))[:-1]
if {no_streamed_predict}:
    grpc_server.streamed_prediction_handlers = lambda service: grpc.method_handlers_generic_handler(
        "sagemaker_tfs.Nothing", {{}}
    )
sys.exit(main(args))
"""


def stand_in_bin(
    directory: Path, moved_tcp_port: bool = False, no_streamed_predict: bool = False,
    cut_answers: bool = False,
) -> Path:  # fmt: skip
    """A directory with a ``tensorflow_model_server`` stand-in, to put first on PATH."""
    directory.mkdir()
    script = directory / "tensorflow_model_server"
    code = STAND_IN.format(
        moved_tcp_port=moved_tcp_port, no_streamed_predict=no_streamed_predict,
        cut_answers=cut_answers,
    )  # fmt: skip
    script.write_text(f"#!{sys.executable}\n{code}")
    script.chmod(0o755)
    return directory


@pytest.fixture(scope="module")
def model_dir(test_models, tmp_path_factory: pytest.TempPathFactory) -> Path:
    model_dir = tmp_path_factory.mktemp("link_models")
    for name in MODELS:
        (model_dir / name).symlink_to(test_models(name), target_is_directory=True)
    return model_dir


def stack_with(
    model_dir: Path, tmp_path_factory: pytest.TempPathFactory, **stand_in: bool
) -> Iterator[RunningStack]:
    bin_dir = stand_in_bin(tmp_path_factory.mktemp("bin") / "bin", **stand_in)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    with running_stack(model_dir, tmp_path_factory.mktemp("link_work"), env) as running:
        yield running


@pytest.fixture(scope="module")
def socket_only_stack(model_dir: Path, tmp_path_factory) -> Iterator[RunningStack]:
    yield from stack_with(model_dir, tmp_path_factory, moved_tcp_port=True)


@pytest.fixture(scope="module")
def unary_only_stack(model_dir: Path, tmp_path_factory) -> Iterator[RunningStack]:
    yield from stack_with(model_dir, tmp_path_factory, no_streamed_predict=True)


def detector_request(seed: int, count: int = 2) -> bytes:
    rng = np.random.default_rng(seed)
    images = []
    for _ in range(count):
        buffer = io.BytesIO()
        Image.fromarray(rng.integers(0, 255, (512, 512, 3), dtype=np.uint8)).save(buffer, "JPEG")
        images.append(buffer.getvalue())
    return b"".join(len(image).to_bytes(4, "big") + image for image in images)


def post_detector(stack: RunningStack, body: bytes, accept: str) -> requests.Response:
    return stack.post(
        body,
        "application/x-image-stream",
        Accept=accept,
        **{"X-Amzn-SageMaker-Custom-Attributes": "tfs-model-name=detector"},
    )


def detector_npz(stack: RunningStack, body: bytes) -> dict[str, np.ndarray]:
    response = post_detector(stack, body, "application/x-npz")
    assert response.status_code == 200, response.text
    with np.load(io.BytesIO(response.content), allow_pickle=False) as archive:
        return {name: archive[name] for name in archive.files}


def grpc_port(stack: RunningStack) -> int:
    config = json.loads((stack.work_dir / "stack.json").read_text())
    return config["instances"][0]["grpc_port"]


def test_service_reaches_the_model_server_over_its_unix_socket(
    socket_only_stack: RunningStack, unary_only_stack: RunningStack
) -> None:
    """Nothing listens on the gRPC TCP port the service was told of; the socket answers, with
    the streamed answer (~11 MB here), the same arrays as the other stack's unary answer."""
    port = grpc_port(socket_only_stack)
    assert (socket_only_stack.work_dir / f"grpc-{port}.sock").is_socket()
    body = detector_request(seed=1)
    streamed = detector_npz(socket_only_stack, body)
    unary = detector_npz(unary_only_stack, body)
    assert sorted(streamed) == ["output_0", "output_1", "output_2"]
    assert sum(array.nbytes for array in streamed.values()) > 4 << 20  # streamed (fast_path)
    for name, array in unary.items():
        np.testing.assert_array_equal(streamed[name], array)


def test_streamed_predicts_fall_back_to_predict(unary_only_stack: RunningStack) -> None:
    """Against a model server without the streamed Predict, large answers still arrive (by
    Predict), request after request, and small ones too."""
    first = detector_npz(unary_only_stack, detector_request(seed=2))
    again = detector_npz(unary_only_stack, detector_request(seed=2))
    for name, array in first.items():
        np.testing.assert_array_equal(again[name], array)
    log = unary_only_stack.log_text()
    assert "Traceback" not in log


def test_an_answer_that_breaks_off_is_cut_short_not_hung(
    model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A streamed answer that ends early: an .npz, or the .npy of one output, already on its
    way is cut short at once (the connection reset: the client sees an incomplete body, not a
    hang); an answer gathered first (JSON) is a 502 with a JSON error; one log line each, no
    traceback; and the stack keeps serving."""
    for stack in stack_with(model_dir, tmp_path_factory, cut_answers=True):
        body = detector_request(seed=3)
        with pytest.raises(requests.exceptions.ChunkedEncodingError):
            post_detector(stack, body, "application/x-npz")
        largest = {"X-Amzn-SageMaker-Custom-Attributes": "tfs-model-name=detector,"
                   "tfs-output-filter=output_2"}  # fmt: skip
        with pytest.raises(requests.exceptions.ChunkedEncodingError):  # 8.4 MB of .npy
            stack.post(body, "application/x-image-stream", Accept="application/x-npy", **largest)
        as_json = post_detector(stack, body, "application/json")
        assert as_json.status_code == 502
        assert "ended after" in as_json.json()["error"]
        attributes = "tfs-model-name=detector,tfs-output-filter=output_0"
        headers = {"Accept": "application/x-npz", "X-Amzn-SageMaker-Custom-Attributes": attributes}
        small = stack.post(body, "application/x-image-stream", **headers)  # streamed: 6 MB in
        assert small.status_code == 502  # a 0.5 MB answer is gathered before it is sent
        assert "ended after 0 of the 522240 bytes" in small.json()["error"]
        one_image = detector_request(seed=5, count=1)  # 3 MB in, 0.3 MB out: Predict
        assert stack.post(one_image, "application/x-image-stream", **headers).status_code == 200
        log = stack.log_text()
        assert "answer cut short" in log
        assert "Traceback" not in log
