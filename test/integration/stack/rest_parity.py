"""What the REST path answers a JSON or CSV body, beside what the stack answers it, and which
of the model server's front ends answered (test_text_predict.py, test_text_cliffs.py).

The REST path is the one the service takes for the bodies it does not read into arrays:
the body converted (``text_rest.convert``: what ``text_codecs.read_body`` gives as a
``RestRequest``) and posted to the model server's REST API, the answer passed on by the
service's one-line rule.
"""

from __future__ import annotations

import requests
from sagemaker_tfs.service.codecs.content_types import one_line_json_type
from sagemaker_tfs.service.codecs.text.text_rest import convert
from sagemaker_tfs.stack_config import StackConfig
from sagemaker_tfs.wire.errors import HttpError
from sagemaker_tfs.wire.http_headers import accept_list
from whole_stack import Stack

JSON = "application/json"


def rest_port(stack: Stack) -> int:
    return rest_ports(stack)[0]


def rest_ports(stack: Stack) -> list[int]:
    """Every model server's REST port (a multi-model stack runs two by default)."""
    return [
        instance.rest_port for instance in StackConfig.load(stack.work_dir / "stack.json").instances
    ]


def metrics_lines(stack: Stack) -> list[str]:
    """The Prometheus lines of every model server of ``stack``, one after another."""
    return [
        line
        for port in rest_ports(stack)
        for line in requests.get(
            f"http://127.0.0.1:{port}/monitoring/prometheus/metrics", timeout=10
        ).text.splitlines()
    ]


def rest_answer(stack: Stack, path: str, content_type: str, body: bytes,
                accept: str | None) -> tuple[int, str, bytes]:  # fmt: skip
    """What the REST path answers: the converted body posted to the model server's REST
    API, passed on by the service's one-line rule."""
    try:
        converted = convert(content_type, body).encode()
    except HttpError as error:
        return error.status, JSON, error.body()
    response = requests.post(f"http://127.0.0.1:{rest_port(stack)}{path}", data=converted,
                             headers={"Content-Type": JSON}, timeout=120)  # fmt: skip
    one_line_type = one_line_json_type(accept_list(accept or ""))
    if one_line_type is None:
        return response.status_code, JSON, response.content
    return response.status_code, one_line_type, response.content.replace(b"\n", b"")


def stack_answer(stack: Stack, path: str, content_type: str, body: bytes,
                 accept: str | None) -> tuple[int, str, bytes]:  # fmt: skip
    headers = {"Content-Type": content_type}
    if accept is not None:
        headers["Accept"] = accept
    response = requests.post(stack.url + path, data=body, headers=headers, timeout=120)
    return response.status_code, response.headers["Content-Type"], response.content


def answered_by(stack: Stack, entrypoint: str) -> int:
    """Predict requests the model server answered through ``entrypoint`` (GRPC, REST)."""
    total = 0
    for line in metrics_lines(stack):
        if line.startswith(":tensorflow:serving:request_latency_count{") and (
            f'entrypoint="{entrypoint}"' in line and 'api="predict"' in line.lower()
        ):
            total += int(float(line.rsplit(" ", 1)[1]))
    return total


def requests_counted(stack: Stack, model: str) -> int:
    """Requests for ``model`` the model server counted, by either front end, refused ones
    included (the latency histogram of ``answered_by`` counts answers only)."""
    prefix = ":tensorflow:serving:request_count{"
    return sum(
        int(float(line.rsplit(" ", 1)[1]))
        for line in metrics_lines(stack)
        if line.startswith(prefix) and f'model_name="{model}"' in line
    )
