"""The README's ``code/inference.py`` examples (``examples/inference/``), each served by the
whole stack (nginx, gunicorn, the Python model server) beside its model, as a user ships it.

The answers are compared with the same SavedModel run in the test process with TensorFlow,
and the failure statuses with what the README says a client sees.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pytest
import requests
from stream_clients import close_of, exchange, open_stream
from test_fast_path import jpeg
from whole_stack import stack_with_code

REPO_ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = REPO_ROOT / "examples" / "inference"
BUNDLED_MODEL = REPO_ROOT / "test" / "resources" / "models" / "half_plus_three"
VERSION = "123"  # the bundled model's only version
X = [1.0, 2.0, 5.0, -7.25]


def served_by(root: Path, example: str, model: Path = BUNDLED_MODEL, env: dict | None = None):
    """The stack serving ``model`` with the example's ``code/`` beside it."""
    return stack_with_code(root, model, EXAMPLES / example / "code", env)


def model_answers(model_dir: Path, **inputs: np.ndarray) -> dict[str, np.ndarray]:
    """The SavedModel's serving_default run in this process."""
    import tensorflow as tf

    loaded = tf.saved_model.load(str(model_dir))
    outputs = loaded.signatures["serving_default"](
        **{name: tf.constant(value) for name, value in inputs.items()}
    )
    return {name: value.numpy() for name, value in outputs.items()}


@pytest.fixture(scope="module")
def expected_y() -> list[float]:
    y = model_answers(BUNDLED_MODEL / f"00000{VERSION}", x=np.array(X, np.float32))["y"]
    assert y.shape == (len(X),)
    return y.tolist()


def test_json_input_and_output_handlers(tmp_path: Path, expected_y: list[float]) -> None:
    with served_by(tmp_path, "json") as stack:
        answer = stack.post(json.dumps({"values": X}), "application/json")
        assert answer.status_code == 200, answer.text
        assert answer.headers["Content-Type"].startswith("application/json")
        assert answer.json() == {"model": "half_plus_three", "y": expected_y}
        # a body that is not JSON: the handler's json.load fails on the request, a 400
        not_json = stack.post(b'{"values": [1.0,', "application/json")
        assert not_json.status_code == 400, not_json.text
        assert "Expecting value" in not_json.json()["error"]
        # the handler raises for another type: 500 with its message
        wrong_type = stack.post(b"1.0", "text/csv")
        assert wrong_type.status_code == 500
        assert wrong_type.json() == {"error": "expected application/json, got text/csv"}
        # the model server refuses what input_handler sent: its status and error, and
        # output_handler is not called (it would fail on the missing "predictions")
        refused = stack.post(json.dumps({"values": ["a", "b"]}), "application/json")
        assert refused.status_code == 400, refused.text
        assert "error" in refused.json() and "y" not in refused.json()


def test_csv_input_and_output_handlers(tmp_path: Path, expected_y: list[float]) -> None:
    body = f"{X[0]}\n{X[1]},{X[2]}\n\n{X[3]}\n"
    with served_by(tmp_path, "csv") as stack:
        answer = stack.post(body, "text/csv", Accept="text/csv")
        assert answer.status_code == 200, answer.text
        assert answer.headers["Content-Type"].startswith("text/csv")
        assert [float(line) for line in answer.text.splitlines()] == expected_y
        assert answer.text.endswith("\n") and answer.text.count("\n") == len(X)
        not_utf8 = stack.post(b"1.0\n\xff\xfe\n", "text/csv")
        assert not_utf8.status_code == 400, not_utf8.text
        not_a_number = stack.post(b"1.0\nabc\n", "text/csv")
        assert not_a_number.status_code == 500
        assert "could not convert string to float: 'abc'" in not_a_number.json()["error"]


def test_images_as_jpeg_and_as_base64_json(tmp_path: Path, test_models) -> None:
    model = test_models("jpeg_classifier")
    images = [jpeg(150, 120, seed=60), jpeg(64, 96, seed=61), jpeg(32, 32, seed=62)]
    outputs = model_answers(model / "1", image_bytes=np.array(images, dtype=object))
    pairs = zip(outputs["classes"], outputs["probabilities"], strict=True)
    expected = [(int(c), float(p[c])) for c, p in pairs]
    with served_by(tmp_path, "images", model) as stack:
        answers = []
        for content_type in ("application/x-image", "image/jpeg"):
            one = stack.post(images[0], content_type)
            assert one.status_code == 200, one.text
            answers.append(one.json()["predictions"])
        assert answers[0] == answers[1] and len(answers[0]) == 1
        batch = {"images": [base64.b64encode(image).decode("ascii") for image in images]}
        many = stack.post(json.dumps(batch), "application/json")
        assert many.status_code == 200, many.text
        predictions = many.json()["predictions"]
        refused = stack.post(b"GIF89a", "image/gif")
        assert refused.status_code == 500
        assert refused.json() == {"error": "unsupported content type image/gif"}
        # not a JPEG: the model's DecodeJpeg refuses it at the model server, a 400
        not_jpeg = stack.post(b"not an image", "application/x-image")
        assert not_jpeg.status_code == 400, not_jpeg.text
    assert answers[0][0]["class"] == expected[0][0]
    assert [p["class"] for p in predictions] == [c for c, _ in expected]
    np.testing.assert_allclose([p["probability"] for p in predictions],
                               [p for _, p in expected], rtol=1e-5)  # fmt: skip


def test_single_handler_over_rest(tmp_path: Path, expected_y: list[float]) -> None:
    with served_by(tmp_path, "handler") as stack:
        as_json = stack.post(json.dumps({"instances": X}), "application/json")
        assert as_json.status_code == 200, as_json.text
        assert as_json.json() == {"predictions": expected_y}
        csv_body = "".join(f"{x}\n" for x in X)
        as_csv = stack.post(csv_body, "text/csv", Accept="text/csv")
        assert as_csv.status_code == 200, as_csv.text
        assert as_csv.headers["Content-Type"].startswith("text/csv")
        assert [float(line) for line in as_csv.text.splitlines()] == expected_y
        pinned = stack.post(
            json.dumps({"instances": X}), "application/json",
            **{"X-Amzn-SageMaker-Custom-Attributes": f"tfs-model-version={VERSION}"},
        )  # fmt: skip
        assert pinned.json() == {"predictions": expected_y}
        # the model server's 404 for a version it does not serve, passed on as the handler's
        # own error: a handler owns its answer (500)
        missing = stack.post(
            json.dumps({"instances": X}), "application/json",
            **{"X-Amzn-SageMaker-Custom-Attributes": "tfs-model-version=999"},
        )  # fmt: skip
        assert missing.status_code == 500
        assert "model server answered 404" in missing.json()["error"]


def test_handler_with_its_own_grpc_predict(tmp_path: Path, expected_y: list[float]) -> None:
    with served_by(tmp_path, "grpc") as stack:
        answer = stack.post(json.dumps({"instances": X}), "application/json")
        assert answer.status_code == 200, answer.text
        assert answer.json() == {"predictions": expected_y}
        again = stack.post(
            json.dumps({"instances": X[:2]}), "application/json",
            **{"X-Amzn-SageMaker-Custom-Attributes": f"tfs-model-version={VERSION}"},
        )  # fmt: skip
        assert again.json() == {"predictions": expected_y[:2]}
        missing = stack.post(
            json.dumps({"instances": X}), "application/json",
            **{"X-Amzn-SageMaker-Custom-Attributes": "tfs-model-version=999"},
        )  # fmt: skip
        assert missing.status_code == 500
        assert "999" in missing.json()["error"]


def test_stream_handler_predicts_10000_messages_over_one_websocket(tmp_path: Path) -> None:
    """Text (JSON) and binary (float32) messages in turn, each answered through the model."""
    x = np.linspace(-5, 5, 40, dtype=np.float32)
    y = model_answers(BUNDLED_MODEL / f"00000{VERSION}", x=x)["y"].tolist()
    text = [json.dumps({"instances": x[i : i + 4].tolist(), "id": i}) for i in range(36)]
    binary = [x[i : i + 4].astype("<f4").tobytes() for i in range(36)]
    messages = [m for pair in zip(text, binary, strict=True) for m in pair] * 140
    with served_by(tmp_path, "stream") as stack:
        with open_stream(stack.url) as connection:
            answers = exchange(connection, messages)
        binary_json_and_fragments(stack.url, x[:4].tolist(), y[:4])
    assert len(answers) == len(messages) == 10_080
    for index, answer in enumerate(answers[:72]):
        i = index // 2
        if index % 2 == 0:
            assert json.loads(answer) == {"predictions": y[i : i + 4], "id": i}
        else:
            assert np.frombuffer(answer, "<f4").tolist() == y[i : i + 4]
    assert answers[72:] == answers[:72] * 139


def binary_json_and_fragments(url: str, x: list[float], y: list[float]) -> None:
    """A client that sets no DataType (every message binary) opens the stream with the query
    string ``binary=json``; a message sent in fragments arrives whole; a binary message that
    is not float32 values ends the stream with the handler's error."""
    request = json.dumps({"instances": x, "id": "b"})
    with open_stream(url, query="binary=json") as connection:
        connection.send(request.encode())
        assert json.loads(connection.recv(timeout=30)) == {"predictions": y, "id": "b"}
        connection.send([request[:5].encode(), request[5:].encode()])  # continuation frames
        answer = connection.recv(timeout=30)
        assert isinstance(answer, bytes) and json.loads(answer)["id"] == "b"
    with open_stream(url) as connection:
        connection.send([request[:7], request[7:]])
        assert json.loads(connection.recv(timeout=30)) == {"predictions": y, "id": "b"}
        connection.send(b"\x00" * 6)
        code, reason = close_of(connection)
    assert code == 1011 and "6 bytes is not a multiple of 4" in reason


def test_streaming_handler_as_events_and_json_lines(
    tmp_path: Path, expected_y: list[float]
) -> None:
    request = json.dumps({"instances": X, "batch_size": 3})
    with served_by(tmp_path, "streaming") as stack:
        events = stack.post(request, "application/json", Accept="text/event-stream")
        assert events.status_code == 200, events.text
        assert events.headers["Content-Type"] == "text/event-stream"
        assert events.headers["Transfer-Encoding"] == "chunked"
        assert events.text == (
            f"data: {json.dumps({'predictions': expected_y[:3]})}\n\n"
            f"data: {json.dumps({'predictions': expected_y[3:]})}\n\n"
            f"event: end\ndata: {json.dumps({'count': len(X)})}\n\n"
        )
        lines = stack.post(request, "application/json")
        assert lines.headers["Content-Type"] == "application/jsonlines"
        predictions = [json.loads(line)["predictions"] for line in lines.text.splitlines()]
        assert predictions == [expected_y[:3], expected_y[3:]]
        # the model server refuses the second batch: the first arrives, then the body breaks off
        refused = json.dumps({"instances": [*X[:3], "a"], "batch_size": 3})
        cut = requests.post(f"{stack.url}/invocations", data=refused, stream=True, timeout=30)
        received = []
        with pytest.raises(requests.exceptions.ChunkedEncodingError):
            for line in cut.iter_lines():
                received.append(json.loads(line)["predictions"])
        assert received == [expected_y[:3]]
        # before the first chunk: an ordinary error answer
        bad = stack.post(json.dumps({"instances": X, "batch_size": 0}), "application/json")
        assert bad.status_code == 500 and bad.json() == {"error": "batch_size must be at least 1"}


def test_sessions_handler_keeps_each_sessions_history(
    tmp_path: Path, expected_y: list[float]
) -> None:
    header = "X-Amzn-SageMaker-Session-Id"
    with served_by(tmp_path, "sessions", env={"SAGEMAKER_TFS_SESSIONS": "true"}) as stack:

        def open_session() -> str:
            opened = stack.post(json.dumps({"requestType": "NEW_SESSION"}))
            assert opened.status_code == 200, opened.text
            return opened.headers["X-Amzn-SageMaker-New-Session-Id"].split(";")[0]

        def predict(values: list[float], **headers: str) -> dict:
            answer = stack.post(json.dumps({"instances": values}), "application/json", **headers)
            assert answer.status_code == 200, answer.text
            return answer.json()

        first, second = open_session(), open_session()
        assert predict(X[:2], **{header: first})["seen"] == 2
        assert predict(X[2:3], **{header: second}) == {
            "predictions": expected_y[2:3],
            "seen": 1,
            "total": expected_y[2],
        }
        assert predict(X[3:], **{header: first}) == {
            "predictions": expected_y[3:],
            "seen": 3,
            "total": sum(expected_y[:2] + expected_y[3:]),
        }
        assert predict(X) == {"predictions": expected_y}  # outside any session
        closed = stack.post(json.dumps({"requestType": "CLOSE"}), **{header: first})
        assert closed.headers["X-Amzn-SageMaker-Closed-Session-Id"] == first
        gone = stack.post(json.dumps({"instances": X}), **{header: first})
        assert gone.status_code == 400 and first in gone.json()["error"]
