"""The same request, in each server's own form, for every scenario of bench_peers.py.

A ``Call`` is what wrk sends (path, headers, body) plus a check of one answer. The payloads
are built once from the same values: the peers get them in their documented forms (KServe V1
``instances`` and V2 tensors, BentoML's typed JSON, multipart image and file, Triton's V2 JSON
and binary tensors, Ray's raw body), this stack gets them as a SageMaker client sends them.
"""

from __future__ import annotations

import base64
import io
import json
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

SMALL_VALUES = [1.0, 2.0, 5.0]
HEAVY_ROWS, HEAVY_FEATURES = 64, 16
JSON_MB, TENSOR_MB = 10, 100
HANDLER_VALUES = 64
MULTIPART_BOUNDARY = "sagemaker-tfs-bench-boundary"
CUSTOM_ATTRIBUTES = "X-Amzn-SageMaker-Custom-Attributes"


@dataclass
class Call:
    path: str
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    check: Callable[[bytes], None] = lambda answer: None


class Payloads:
    """The scenarios' values, made once (seeded) and shared by every server's requests."""

    def __init__(self, jpeg: bytes) -> None:
        rng = np.random.default_rng(37)
        self.jpeg = jpeg
        self.heavy = rng.uniform(-1, 1, (HEAVY_ROWS, HEAVY_FEATURES)).astype(np.float32)
        # ~10 MB of JSON: values printed with 6 decimals take ~9 bytes each
        self.json_values = np.round(rng.uniform(0, 1, JSON_MB * 1_000_000 // 9), 6)
        self.tensor = rng.uniform(0, 1, TENSOR_MB * 1_000_000 // 4).astype(np.float32)
        self.handler_values = np.round(rng.uniform(0, 10, HANDLER_VALUES), 4).tolist()
        self._cache: dict[str, bytes] = {}

    def once(self, key: str, make: Callable[[], bytes]) -> bytes:
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    def instances(self, key: str) -> bytes:
        values = {"small": SMALL_VALUES, "heavy": self.heavy.tolist(),
                  "json10mb": self.json_values.tolist()}[key]  # fmt: skip
        return self.once(f"instances-{key}", lambda: json.dumps({"instances": values}).encode())

    def v2_json(self, key: str, name: str = "x") -> bytes:
        array = {"small": np.asarray(SMALL_VALUES, np.float32), "heavy": self.heavy,
                 "json10mb": self.json_values.astype(np.float32)}[key]  # fmt: skip
        tensor = {"name": name, "shape": list(array.shape), "datatype": "FP32",
                  "data": array.reshape(-1).tolist()}  # fmt: skip
        return self.once(f"v2-{key}", lambda: json.dumps({"inputs": [tensor]}).encode())

    def npy(self) -> bytes:
        def make() -> bytes:
            out = io.BytesIO()
            np.save(out, self.tensor)
            return out.getvalue()

        return self.once("npy", make)

    def handlers_json(self) -> bytes:
        return json.dumps({"values": self.handler_values}).encode()


# ---------------------------------------------------------------- V2 binary tensors


def v2_binary(name: str, datatype: str, shape: list[int], raw: bytes) -> tuple[bytes, dict]:
    """KServe/Triton's binary tensor extension: a JSON header, then the raw bytes; the answer's
    tensors asked for in binary too."""
    header = json.dumps({
        "inputs": [{"name": name, "shape": shape, "datatype": datatype,
                    "parameters": {"binary_data_size": len(raw)}}],
        "parameters": {"binary_data_output": True},
    }).encode()  # fmt: skip
    headers = {"Content-Type": "application/octet-stream",
               "Inference-Header-Content-Length": str(len(header))}  # fmt: skip
    return header + raw, headers


def v2_bytes_element(data: bytes) -> bytes:
    """One BYTES element in Triton's binary form: its length (4 bytes, little-endian), then it."""
    return struct.pack("<I", len(data)) + data


def multipart(field_name: str, filename: str, content_type: str, data: bytes) -> tuple[bytes, dict]:
    """One file field of a multipart/form-data body (BentoML's files and images)."""
    head = (
        f'--{MULTIPART_BOUNDARY}\r\nContent-Disposition: form-data; name="{field_name}"; '
        f'filename="{filename}"\r\nContent-Type: {content_type}\r\n\r\n'
    ).encode()
    body = head + data + f"\r\n--{MULTIPART_BOUNDARY}--\r\n".encode()
    return body, {"Content-Type": f"multipart/form-data; boundary={MULTIPART_BOUNDARY}"}


# ---------------------------------------------------------------- checks


def expect_json_key(key: str) -> Callable[[bytes], None]:
    def check(answer: bytes) -> None:
        if key.encode() not in answer[:4096]:
            raise AssertionError(f"no {key!r} in the answer: {answer[:300]!r}")

    return check


def expect_size_at_least(size: int) -> Callable[[bytes], None]:
    def check(answer: bytes) -> None:
        if len(answer) < size:
            raise AssertionError(
                f"answer of {len(answer)} bytes, expected {size}+: {answer[:300]!r}"
            )

    return check


# ---------------------------------------------------------------- each server's calls

JSON = {"Content-Type": "application/json"}


def stack_calls(p: Payloads, scenario: str) -> Call | None:
    """This stack, as a SageMaker client calls /invocations (the model named in the custom
    attributes: one stack serves the three models)."""
    model = {"small": "half_plus_three", "heavy": "compute_heavy", "image": "mobilenet_v2",
             "json10mb": "half_plus_three", "tensor100mb": "half_plus_three",
             "handlers": "half_plus_three"}[scenario]  # fmt: skip
    headers = {CUSTOM_ATTRIBUTES: f"tfs-model-name={model}", "Accept": "application/json"}
    if scenario in ("small", "heavy", "json10mb"):
        return Call("/invocations", p.instances(scenario), {**headers, **JSON},
                    expect_json_key("predictions"))  # fmt: skip
    if scenario == "image":
        return Call("/invocations", p.jpeg, {**headers, "Content-Type": "image/jpeg"},
                    expect_json_key("predictions"))  # fmt: skip
    if scenario == "tensor100mb":
        npy_headers = {
            **headers,
            "Content-Type": "application/x-npy",
            "Accept": "application/x-npy",
        }
        return Call("/invocations", p.npy(), npy_headers, expect_size_at_least(len(p.npy())))
    return Call("/invocations", p.handlers_json(), {**headers, **JSON}, expect_json_key("labels"))


def kserve_calls(p: Payloads, scenario: str) -> Call | None:
    """KServe's V1 protocol (its image input: ``{"b64": ...}`` in the instances)."""
    if scenario in ("small", "heavy", "json10mb"):
        model = "compute_heavy" if scenario == "heavy" else "half_plus_three"
        return Call(f"/v1/models/{model}:predict", p.instances(scenario), JSON,
                    expect_json_key("predictions"))  # fmt: skip
    if scenario == "image":
        body = p.once("kserve-image", lambda: json.dumps({"instances": [
            {"image_bytes": {"b64": base64.b64encode(p.jpeg).decode()}}]}).encode())  # fmt: skip
        return Call("/v1/models/mobilenet_v2:predict", body, JSON, expect_json_key("predictions"))
    if scenario == "handlers":
        return Call(
            "/v1/models/handlers:predict", p.handlers_json(), JSON, expect_json_key("labels")
        )
    return None  # a 100 MB tensor goes by V2's binary extension: kserve-v2


def kserve_v2_calls(p: Payloads, scenario: str) -> Call | None:
    """KServe's V2 (Open Inference Protocol): JSON tensors; binary tensors for 100 MB."""
    if scenario in ("small", "heavy"):
        model = "compute_heavy" if scenario == "heavy" else "half_plus_three"
        return Call(
            f"/v2/models/{model}/infer", p.v2_json(scenario), JSON, expect_json_key("outputs")
        )
    if scenario == "tensor100mb":
        raw = p.tensor.tobytes()
        body, headers = v2_binary("x", "FP32", [p.tensor.size], raw)
        return Call(
            "/v2/models/half_plus_three/infer", body, headers, expect_size_at_least(len(raw))
        )
    return None


def bentoml_calls(p: Payloads, scenario: str) -> Call | None:
    """BentoML's typed APIs: JSON fields by parameter name, multipart for image and file."""
    if scenario in ("small", "heavy", "json10mb"):
        path = "/heavy" if scenario == "heavy" else "/predict"
        return Call(path, p.instances(scenario), JSON, expect_json_key("predictions"))
    if scenario == "image":
        body, headers = multipart("image", "image.jpg", "image/jpeg", p.jpeg)
        return Call("/classify", body, headers, expect_json_key("predictions"))
    if scenario == "tensor100mb":
        body, headers = multipart("npy", "x.npy", "application/octet-stream", p.npy())
        return Call("/tensor", body, headers, expect_size_at_least(len(p.npy())))
    return Call("/handlers", p.handlers_json(), JSON, expect_json_key("labels"))


def pytriton_calls(p: Payloads, scenario: str) -> Call | None:
    """Triton's V2 HTTP protocol: JSON tensors, binary tensors for the image and 100 MB."""
    if scenario in ("small", "heavy", "json10mb"):
        model = "compute_heavy" if scenario == "heavy" else "half_plus_three"
        return Call(
            f"/v2/models/{model}/infer", p.v2_json(scenario), JSON, expect_json_key("outputs")
        )
    if scenario == "image":
        body, headers = v2_binary("image", "BYTES", [1], v2_bytes_element(p.jpeg))
        return Call("/v2/models/mobilenet_v2/infer", body, headers, expect_size_at_least(4000))
    if scenario == "tensor100mb":
        raw = p.tensor.tobytes()
        body, headers = v2_binary("x", "FP32", [p.tensor.size], raw)
        return Call(
            "/v2/models/half_plus_three/infer", body, headers, expect_size_at_least(len(raw))
        )
    body = p.once("triton-handlers", lambda: json.dumps({"inputs": [{
        "name": "values", "shape": [HANDLER_VALUES], "datatype": "FP32",
        "data": p.handler_values}]}).encode())  # fmt: skip
    return Call("/v2/models/handlers/infer", body, JSON, expect_json_key("labels"))


def ray_calls(p: Payloads, scenario: str) -> Call | None:
    """Ray Serve's FastAPI routes: JSON, the raw JPEG and the raw .npy."""
    if scenario in ("small", "heavy", "json10mb"):
        path = "/heavy" if scenario == "heavy" else "/predict"
        return Call(path, p.instances(scenario), JSON, expect_json_key("predictions"))
    if scenario == "image":
        return Call(
            "/classify", p.jpeg, {"Content-Type": "image/jpeg"}, expect_json_key("predictions")
        )
    if scenario == "tensor100mb":
        return Call("/tensor", p.npy(), {"Content-Type": "application/octet-stream"},
                    expect_size_at_least(len(p.npy())))  # fmt: skip
    return Call("/handlers", p.handlers_json(), JSON, expect_json_key("labels"))


CALLS: dict[str, Callable[[Payloads, str], Call | None]] = {
    "stack": stack_calls,
    "kserve": kserve_calls,
    "kserve-v2": kserve_v2_calls,
    "bentoml": bentoml_calls,
    "pytriton": pytriton_calls,
    "ray": ray_calls,
}
