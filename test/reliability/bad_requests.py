"""A seeded generator of bad requests for every route and content type of the stack.

``generate(target, seed, count)`` yields ``BadRequest``s: first every case listed in issue 10
(the regressions), then ``count`` minus that many random ones. A random one picks a route, a
method, a content type, a body made bad in one of many ways (truncated, bytes flipped,
declared sizes that the bytes do not hold, deep nesting, huge numbers, lone surrogates,
decompression bombs...) and hostile headers; one in eight is malformed HTTP sent as raw
bytes (bad request lines, Content-Length, chunking, Host, control characters, long lines).
The same seed gives the same requests, so a failure can be replayed.

Every request is complete as sent (declared lengths match the bytes, chunked bodies end):
a server waiting for bytes that never come is then a hang, not the client's fault.
"""

from __future__ import annotations

import functools
import json
import random
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
from payload_bytes import (
    image_bytes,
    image_stream_bytes,
    npy_bytes,
    zip_bytes,
    zip_needing_version_11_3,
)

MB = 1024 * 1024
METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD", "TRACE", "FOO")
ACCEPTS = (
    "application/json",
    "application/jsonlines",
    "text/csv",
    "application/x-npy",
    "application/x-npz",
    "*/*",
    "image/png",
    "text/html",
    "application/x-npy, text/csv;q=0.5",
    "",
    "\x7f\x01",
)


@dataclass(frozen=True)
class Target:
    """What the stack under test serves: ``model`` is the loaded model's name (multi-model:
    the name it was loaded under), ``multi_model`` whether /models routes exist."""

    multi_model: bool
    model: str = "half_plus_three"
    models_url: str = "half_plus_three"  # a loadable url: used only with a taken name (409)


@dataclass
class BadRequest:
    """One request: ``raw`` bytes as they are, else built from the other fields."""

    label: str
    method: str = "POST"
    path: str = "/invocations"
    headers: list[tuple[str, str | bytes]] = field(default_factory=list)
    body: bytes = b""
    raw: bytes | None = None

    def wire(self) -> bytes:
        """The bytes to send; ``Connection: close`` so that the answer ends with the stream."""
        if self.raw is not None:
            return self.raw
        lines = [f"{self.method} {self.path} HTTP/1.1".encode("latin-1"), b"Host: localhost"]
        for name, value in self.headers:
            data = value if isinstance(value, bytes) else value.encode("utf-8")
            lines.append(name.encode("latin-1") + b": " + data)
        if self.body or self.method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(self.body)}".encode())
        lines.append(b"Connection: close")
        return b"\r\n".join(lines) + b"\r\n\r\n" + self.body


# ------------------------------------------------------------------ valid payloads to spoil


GOOD_NPY = npy_bytes(np.array([[1.0], [2.0]], np.float32))
GOOD_NPZ = zip_bytes({"x.npy": GOOD_NPY})
PNG_SMALL = image_bytes((4, 4))
JPEG_SMALL = image_bytes((4, 4), fmt="JPEG")


def _npy_header(shape: str, descr: str = "<f4", fortran: str = "False") -> bytes:
    header = f"{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape}, }}"
    header += " " * (-(len(header) + 11) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode("latin-1")


@functools.cache
def _deflate_bomb(declared_rows: int) -> bytes:
    """An npz whose deflated member says it inflates to ``declared_rows`` float32 values
    (a 1 GB+ member is made by patching the sizes of a small one: the server must refuse it
    from what the archive declares, before inflating anything)."""
    small = 1024
    archive = bytearray(
        zip_bytes({"x.npy": _npy_header(f"({small}, 1)") + bytes(small * 4)}, zipfile.ZIP_DEFLATED)
    )
    declared = len(_npy_header(f"({declared_rows}, 1)")) + declared_rows * 4
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        start = archive.find(signature) + offset
        archive[start : start + 4] = declared.to_bytes(4, "little")
    return bytes(archive)


def _flip(rng: random.Random, data: bytes, count: int) -> bytes:
    spoiled = bytearray(data)
    for _ in range(count):
        spoiled[rng.randrange(len(spoiled))] = rng.randrange(256)
    return bytes(spoiled)


def _truncate(rng: random.Random, data: bytes) -> bytes:
    return data[: rng.randrange(1, len(data))] if len(data) > 1 else b""


def _random_bytes(rng: random.Random, low: int = 1, high: int = 2048) -> bytes:
    return rng.randbytes(rng.randint(low, high))


# ------------------------------------------------------------------ bad bodies per content type

Body = tuple[str, bytes]


def bad_json(rng: random.Random) -> Body:
    depth = rng.choice([1000, 5000, 10_000, 50_000])
    digits = rng.choice([400, 4301, 5000, 20_000])
    choices: list[Callable[[], bytes]] = [
        lambda: b"",
        lambda: b"{",
        lambda: b"[" * depth + b"]" * depth,
        lambda: b'{"instances": ' + b"[" * depth + b"1" + b"]" * depth + b"}",
        lambda: b'{"instances": [' + b"9" * digits + b"]}",
        lambda: b"[" + b"1" * digits + b"]",
        lambda: b'{"instances": ["\\ud800"]}',
        lambda: b'{"instances": ["\\udc00\\ud800"], "x": NaN}',
        lambda: b'{"\\udbff": [1.0]}',
        lambda: b'{"instances": [1e999]}',
        lambda: b'{"instances": [NaN, Infinity, -Infinity]}',
        lambda: b'{"instances": "abc"}',
        lambda: b'{"instances": [[1.0, 2.0], [3.0]]}',
        lambda: b'{"inputs": {"zz": [1.0]}}',
        lambda: b'{"instances": [{"b64": "!!!!"}]}',
        lambda: b'{"signature_name": "\xff\xfe", "instances": [1.0]}',
        lambda: b'{"examples": [{"x": [1, "a", {"b64": 3}]}]}',
        lambda: b'"just a string"',
        lambda: b"null",
        lambda: b"\xff\xfe\x00{}",
        lambda: json.dumps({"instances": [rng.random()] * rng.randint(1, 5000)}).encode(),
        lambda: _truncate(rng, b'{"instances": [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]}'),
        lambda: _flip(rng, b'{"instances": [1.0, 2.0, 5.0]}', rng.randint(1, 4)),
        lambda: _random_bytes(rng),
    ]
    return (
        rng.choice(["application/json", "application/json; charset=utf-8"]),
        rng.choice(choices)(),
    )


def bad_json_lines(rng: random.Random) -> Body:
    lines = [b"[1.0]", b"{", b"[" * 5000 + b"]" * 5000, b'{"a": "\\ud800"}', b"1", b"\xff"]
    body = b"\n".join(rng.choice(lines) for _ in range(rng.randint(1, 6)))
    return rng.choice(["application/jsonlines", "application/jsons"]), body


def bad_csv(rng: random.Random) -> Body:
    choices: list[Callable[[], bytes]] = [
        lambda: b"",
        lambda: _random_bytes(rng),
        lambda: bytes(range(256)) * rng.randint(1, 8),
        lambda: b"1.0,2.0\n3.0",
        lambda: b'"a""b",c\n' * 3,
        lambda: b"9" * 5000,
        lambda: b"1e999,nan,inf",
        lambda: b",".join([b"1"] * rng.randint(1000, 20000)),
        lambda: b"\n" * 1000,
        lambda: _flip(rng, b"1.0\n2.0\n3.0\n", 3),
    ]
    return "text/csv", rng.choice(choices)()


def bad_npy(rng: random.Random) -> Body:
    choices: list[Callable[[], bytes]] = [
        lambda: _npy_header("(10000000000,)") + bytes(64),
        lambda: _npy_header("(2, 1)") + bytes(7),
        lambda: _npy_header("(2, 1)") + bytes(9),
        lambda: _npy_header("(-1, 3)") + bytes(12),
        lambda: _npy_header("(2, 1)", descr="|O") + bytes(16),
        lambda: _npy_header("(2, 1)", descr="<c16") + bytes(32),
        lambda: _npy_header("(2, 1)", descr="<M8[s]") + bytes(16),
        lambda: _npy_header("(2, 1)", descr="V1000000000") + bytes(16),
        lambda: _npy_header("(2, 1)", descr=">f4") + bytes(8),
        lambda: _npy_header("(2, 1)", fortran="True") + bytes(8),
        lambda: _npy_header("(" + "1, " * 5000 + ")") + bytes(4),
        lambda: GOOD_NPY.replace(b"'descr'", b"'''des"),
        lambda: GOOD_NPY.replace(b"{", b"[", 1),
        lambda: b"\x93NUMPY\x03\x00" + GOOD_NPY[8:],
        lambda: b"\x93NUMPY\x01\x00\xff\xff" + _random_bytes(rng, 1, 100),
        lambda: b"\x93NUMPY" + _random_bytes(rng),
        lambda: _truncate(rng, GOOD_NPY),
        lambda: _flip(rng, GOOD_NPY, rng.randint(1, 8)),
        lambda: GOOD_NPZ,
        lambda: npy_bytes(np.ones((3, 4, 5), np.int64)),
        lambda: npy_bytes(np.array(["a", "b"])),
    ]
    return "application/x-npy", rng.choice(choices)()


def bad_npz(rng: random.Random) -> Body:
    choices: list[Callable[[], bytes]] = [
        lambda: b"PK\x03\x04" + rng.randbytes(5),
        lambda: zip_needing_version_11_3(GOOD_NPZ),
        lambda: zip_bytes({"x.npy": GOOD_NPZ}),
        lambda: zip_bytes({"x.npy": _npy_header("(10000000000,)") + bytes(8)}),
        lambda: zip_bytes({"x.npy": b"not an array"}),
        lambda: zip_bytes({"x.npy": GOOD_NPY, "x": GOOD_NPY}),
        lambda: zip_bytes({f"m{i}.npy": GOOD_NPY for i in range(rng.randint(2, 200))}),
        lambda: zip_bytes({}),
        lambda: _deflate_bomb(3 * 10**8),
        lambda: _truncate(rng, GOOD_NPZ),
        lambda: _flip(rng, GOOD_NPZ, rng.randint(1, 8)),
        lambda: GOOD_NPY,
        lambda: _random_bytes(rng),
    ]
    return "application/x-npz", rng.choice(choices)()


def bad_image(rng: random.Random) -> Body:
    choices: list[Callable[[], bytes]] = [
        lambda: _random_bytes(rng),
        lambda: _truncate(rng, PNG_SMALL),
        lambda: _flip(rng, JPEG_SMALL, rng.randint(1, 10)),
        lambda: image_bytes((9000, 9000), mode="1"),
        lambda: image_bytes((15000, 15000), mode="1"),
        lambda: image_bytes((1, 1)),
        lambda: image_bytes((4, 4), mode="CMYK", fmt="JPEG"),
        lambda: image_bytes((4, 4), mode="P", fmt="GIF"),
        lambda: b"\x89PNG\r\n\x1a\n" + _random_bytes(rng, 1, 200),
        lambda: b"\xff\xd8\xff" + _random_bytes(rng, 1, 200),
    ]
    kind = rng.choice(["image/jpeg", "image/png", "application/x-image", "Image/PNG; q=1"])
    return kind, rng.choice(choices)()


def bad_image_stream(rng: random.Random) -> Body:
    choices: list[Callable[[], bytes]] = [
        lambda: (2**31).to_bytes(4, "big") + PNG_SMALL,
        lambda: (len(PNG_SMALL) + 10).to_bytes(4, "big") + PNG_SMALL,
        lambda: b"\x00\x00",
        lambda: b"\x00\x00\x00\x00",
        lambda: image_stream_bytes([PNG_SMALL] * rng.randint(100, 3000)),
        lambda: image_stream_bytes([image_bytes((9000, 9000), mode="1")]),
        lambda: image_stream_bytes([image_bytes((4000, 4000), mode="1")] * 8),
        lambda: image_stream_bytes([PNG_SMALL, _random_bytes(rng, 1, 100)]),
        lambda: image_stream_bytes([PNG_SMALL, image_bytes((5, 7))]),
        lambda: _flip(rng, image_stream_bytes([PNG_SMALL, JPEG_SMALL]), 4),
        lambda: _random_bytes(rng),
    ]
    return "application/x-image-stream", rng.choice(choices)()


def odd_content_type(rng: random.Random) -> Body:
    kind = rng.choice(
        ["", "application/x-unknown", "image/tiff", "multipart/form-data; boundary=x",
         "text/csv; charset=latin-1", "application/JSON", "\x01\x02", "a" * 3000]
    )  # fmt: skip
    return kind, _random_bytes(rng, 0, 512)


BODIES = (
    bad_json,
    bad_json_lines,
    bad_csv,
    bad_npy,
    bad_npz,
    bad_image,
    bad_image_stream,
    odd_content_type,
)


# ------------------------------------------------------------------ hostile headers and routes


def custom_attributes(rng: random.Random, target: Target) -> str:
    return rng.choice(
        [
            "tfs-model-version=99999999999999999999999999",
            "tfs-model-version=9223372036854775808",
            "tfs-model-version=-1",
            "tfs-model-version=123",
            "tfs-method=explode",
            "tfs-method=classify",
            "tfs-method=regress",
            "tfs-model-name=../../etc/passwd",
            "tfs-model-name=no_such_model",
            f"tfs-model-name={target.model},tfs-model-version=0",
            "tfs-model-name=" + "a" * 1000,
            "=,=,=,tfs-model-name",
            "a" * 1024,
            "tfs-model-name=m\u00e9",
        ]
    )


def route_for(rng: random.Random, target: Target) -> tuple[str, list[tuple[str, str | bytes]]]:
    """A path and the headers that choose the model on it."""
    headers: list[tuple[str, str | bytes]] = []
    if not target.multi_model:
        return "/invocations", headers
    choice = rng.randrange(3)
    if choice == 0:
        return f"/models/{target.model}/invoke", headers
    if choice == 1:
        name = rng.choice([target.model, "no_such_model", "../x", "a" * 300, "nl\n", "%0A"])
        headers.append(("X-Amzn-SageMaker-Target-Model", name.replace("\n", "")))
        return "/invocations", headers
    name = rng.choice(["no_such_model", "nl%0A", "..%2F..", "a" * 300, "%00", "%C3%A9"])
    return f"/models/{name}/invoke", headers


def invocation(rng: random.Random, target: Target) -> BadRequest:
    make = rng.choice(BODIES)
    content_type, body = make(rng)
    path, headers = route_for(rng, target)
    if content_type or rng.random() < 0.5:
        headers.append(("Content-Type", content_type))
    if rng.random() < 0.7:
        headers.append(("Accept", rng.choice(ACCEPTS)))
    if rng.random() < 0.3:
        headers.append(("X-Amzn-SageMaker-Custom-Attributes", custom_attributes(rng, target)))
    method = "POST" if rng.random() < 0.9 else rng.choice(METHODS)
    return BadRequest(f"{make.__name__} {content_type[:40]!r}", method, path, headers, body)


def control_request(rng: random.Random, target: Target) -> BadRequest:
    """Multi-model control API: never a valid load of a new model, never an unload."""
    bodies = [
        b"[" * 10_000 + b"]" * 10_000,
        json.dumps({"model_name": "nl\n", "url": target.models_url}).encode(),
        json.dumps({"model_name": "x\r\n", "url": target.models_url}).encode(),
        json.dumps({"model_name": target.model, "url": target.models_url}).encode(),
        json.dumps({"model_name": "fresh", "url": "../../etc"}).encode(),
        json.dumps({"model_name": "fresh", "url": "/etc"}).encode(),
        json.dumps({"model_name": "fresh", "url": "no_such_dir"}).encode(),
        json.dumps({"model_name": "fresh", "url": "half_plus_three/00000123"}).encode(),
        json.dumps({"model_name": "fresh", "url": 5}).encode(),
        json.dumps({"model_name": ["a"], "url": target.models_url}).encode(),
        json.dumps({"model_name": "a" * 200, "url": target.models_url}).encode(),
        json.dumps({"model_name": "\ud800", "url": target.models_url}).encode(),
        b'{"model_name": "' + b"9" * 5000 + b'"}',
        b'{"model_name": ' + b"9" * 5000 + b"}",
        b"\xff\xfe",
        b"",
        b"null",
        b"x" * (70 * 1024),
    ]
    method = rng.choice(["POST"] * 4 + ["GET", "PUT", "PATCH", "OPTIONS", "HEAD", "DELETE"])
    path = rng.choice(["/models", "/models/", "/models/no_such_model", "/models/a/b/c"])
    if method == "DELETE" and path == "/models":
        path = "/models/no_such_model"
    body = rng.choice(bodies) if method in ("POST", "PUT", "PATCH") else b""
    headers: list[tuple[str, str | bytes]] = [("Content-Type", "application/json")]
    return BadRequest(f"control {method} {path}", method, path, headers, body)


def other_route(rng: random.Random, target: Target) -> BadRequest:
    path = rng.choice(
        [
            "/ping",
            "/execution-parameters",
            "/",
            "/tfs/v1/models/half_plus_three",
            "/.error/400",
            "/x.html",
            "/invocations/../ping",
            "/%2e%2e/%2e%2e/etc/passwd",
            "/invocations?" + "a=1&" * 500,
            "/models" if not target.multi_model else "/models/../ping",
            "/" + "a" * 7000,
        ]
    )
    method = rng.choice(METHODS)
    body = _random_bytes(rng, 0, 256) if method in ("POST", "PUT", "PATCH") else b""
    return BadRequest(f"route {method} {path[:40]}", method, path, [], body)


# ------------------------------------------------------------------ malformed HTTP (raw bytes)

_HEAD = b"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"


def malformed_http(rng: random.Random, target: Target) -> BadRequest:
    cases = [
        b"GET /invocations%00 HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /ping\x00 HTTP/1.1\r\nHost: x\r\n\r\n",
        _HEAD + b"Content-Length: abc\r\n\r\n",
        _HEAD + b"Content-Length: -1\r\n\r\n",
        _HEAD + b"Content-Length: 20, 20\r\n\r\n",
        _HEAD + b"Content-Length: 5\r\nContent-Length: 6\r\n\r\n[1.0]",
        _HEAD + b"Content-Length: 99999999999999999999\r\n\r\n",
        _HEAD + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n[1.0]\r\n0\r\n\r\n",
        _HEAD + b"Transfer-Encoding: chunked\r\n\r\n-5\r\n[1.0]\r\n0\r\n\r\n",
        _HEAD + b"Transfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n[1.0]\r\n0\r\n\r\n",
        _HEAD + b"Transfer-Encoding: chunked\r\n\r\n5\r\n[1.0]XX0\r\n\r\n",
        _HEAD + b"Transfer-Encoding: gzip\r\n\r\n",
        _HEAD + b"Transfer-Encoding: chunked, gzip\r\n\r\n",
        _HEAD + b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n5\r\n[1.0]\r\n0\r\n\r\n",
        b"POST /invocations HTTP/1.1\r\nContent-Length: 5\r\n\r\n[1.0]",
        b"POST /invocations HTTP/1.1\r\nHost: x\r\nHost: y\r\nContent-Length: 5\r\n\r\n[1.0]",
        b"POST /invocations HTTP/1.1\r\nHost: a b\r\nContent-Length: 5\r\n\r\n[1.0]",
        _HEAD + b"X-Bad: a\x01b\r\nContent-Length: 5\r\n\r\n[1.0]",
        _HEAD + b"X-Bad\x7f: 1\r\nContent-Length: 5\r\n\r\n[1.0]",
        _HEAD + b"X-Bad : 1\r\nContent-Length: 5\r\n\r\n[1.0]",
        _HEAD + b" folded: header\r\nContent-Length: 5\r\n\r\n[1.0]",
        _HEAD + b"NoColon\r\nContent-Length: 5\r\n\r\n[1.0]",
        _HEAD + b"X-Amzn-SageMaker-Custom-Attributes: " + b"a" * 9000 + b"\r\n\r\n",
        _HEAD + b"X-Amzn-SageMaker-Custom-Attributes: " + b"a" * 40000 + b"\r\n\r\n",
        _HEAD + b"".join(b"X-H%d: v\r\n" % i for i in range(300)) + b"Content-Length: 0\r\n\r\n",
        _HEAD + b"Expect: 100-continue\r\nContent-Length: 5\r\n\r\n[1.0]",
        _HEAD + b"Expect: teapot\r\nContent-Length: 5\r\n\r\n[1.0]",
        b"TRACE /invocations HTTP/1.1\r\nHost: x\r\n\r\n",
        b"TRACE /ping HTTP/1.1\r\nHost: x\r\n\r\n",
        b"CONNECT x:80 HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GARBAGE\r\n\r\n",
        b"GET / HTTP/2.0\r\nHost: x\r\n\r\n",
        b"GET / HTTP/1.1 extra\r\nHost: x\r\n\r\n",
        b"GET / HTTP/0.9\r\n\r\n",
        b"GET http://evil/ping HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET ping HTTP/1.1\r\nHost: x\r\n\r\n",
        b"get /ping HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /" + b"a" * 40000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /ping HTTP/1.1\nHost: x\n\n",
        b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + bytes(32),
        _flip(rng, _HEAD + b"Content-Length: 5\r\n\r\n[1.0]", rng.randint(1, 6)),
        b"X" + rng.randbytes(rng.randint(1, 300)) + b"\r\n\r\n",  # (empty lines: still waiting)
    ]
    raw = rng.choice(cases)
    return BadRequest(f"raw {raw[:40]!r}", raw=raw)


# ------------------------------------------------------------------ the cases of issue 10


def issue_cases(target: Target) -> list[BadRequest]:
    """Every reproduction listed in issue 10, for the target's routes."""
    path = f"/models/{target.model}/invoke" if target.multi_model else "/invocations"

    def post(label: str, content_type: str, body: bytes, **headers: str) -> BadRequest:
        all_headers: list[tuple[str, str | bytes]] = [("Content-Type", content_type)]
        all_headers += [(name.replace("_", "-"), value) for name, value in headers.items()]
        return BadRequest(label, "POST", path, all_headers, body)

    deep = b"[" * 10_000 + b"]" * 10_000
    version = "tfs-model-version=99999999999999999999999999"
    cases = [
        post("npz not a zip", "application/x-npz", b"PK\x03\x04" + bytes(5)),
        post("npz zip version 11.3", "application/x-npz", zip_needing_version_11_3(GOOD_NPZ)),
        post("npz member is a zip", "application/x-npz", zip_bytes({"x.npy": GOOD_NPZ})),
        post("npy corrupted header", "application/x-npy", GOOD_NPY.replace(b"'descr'", b"'''d")),
        post("npy 10**10 floats", "application/x-npy", _npy_header("(10000000000,)") + bytes(12)),
        post(
            "npy version", "application/x-npy", GOOD_NPY, X_Amzn_SageMaker_Custom_Attributes=version
        ),
        post("5000 digits", "application/json", b'{"instances": [' + b"1" * 5000 + b"]}"),
        post("5000 digits csv", "text/csv", b"1" * 5000),
        post("lone surrogate", "application/json", b'{"instances": ["\\ud800"]}'),
        post("random csv", "text/csv", bytes(range(256)) * 4),
        post("bomb png", "image/png", image_bytes((15000, 15000), mode="1")),
        post(
            "bomb stream",
            "application/x-image-stream",
            image_stream_bytes([image_bytes((9000, 9000), "1")]),
        ),
        post("npz bomb", "application/x-npz", _deflate_bomb(3 * 10**8)),
        post("413", "application/json", b"[" + b"1.0," * (2 * MB) + b"1.0]"),
    ]
    for accept in ("application/x-npy", "application/x-npz", "text/csv"):
        cases.append(post(f"deep JSON, Accept {accept}", "application/json", deep, Accept=accept))
    cases += [
        BadRequest("raw " + repr(raw[:40]), raw=raw)
        for raw in (
            b"GET /invocations%00 HTTP/1.1\r\nHost: x\r\n\r\n",
            _HEAD + b"Content-Length: abc\r\n\r\n",
            _HEAD + b"Content-Length: -1\r\n\r\n",
            _HEAD + b"Content-Length: 20, 20\r\n\r\n",
            _HEAD + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n",
            _HEAD + b"Transfer-Encoding: gzip\r\n\r\n",
            b"POST /invocations HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
            _HEAD + b"X-Bad: a\x01b\r\nContent-Length: 0\r\n\r\n",
            _HEAD + b"X-Amzn-SageMaker-Custom-Attributes: " + b"a" * 9000 + b"\r\n\r\n",
            b"TRACE /invocations HTTP/1.1\r\nHost: x\r\n\r\n",
            # found in session 64: bytes that are not UTF-8 quoted in njs's error, bytes that
            # are not ASCII in the URL (gunicorn's HTML 400)
            _HEAD
            + b"X-Amzn-SageMaker-Custom-Attributes: tfs-method=\xe9\r\n"
            + b"Content-Length: 5\r\n\r\n[1.0]",
            _HEAD.replace(b"/invocations", b"/invocations?q=\xe9").replace(b"json", b"x-npy")
            + b"Content-Length: 0\r\n\r\n",
            b"POST /models/\xe9/invoke HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
        )
    ]
    if target.multi_model:
        cases.append(BadRequest("405 on invoke", "GET", path))
        for method in ("PUT", "PATCH", "OPTIONS", "HEAD"):
            cases.append(BadRequest(f"control {method}", method, "/models"))
        for body in (
            deep,
            json.dumps({"model_name": "nl\n", "url": target.models_url}).encode(),
        ):
            cases.append(
                BadRequest(
                    "control POST", "POST", "/models", [("Content-Type", "application/json")], body
                )
            )
    return cases


# ------------------------------------------------------------------ the generator


def generate(target: Target, seed: int, count: int) -> Iterator[BadRequest]:
    """``count`` requests: the issue's cases, then random ones from ``seed``."""
    fixed = issue_cases(target)
    yield from fixed[:count]
    rng = random.Random(seed)
    kinds: list[tuple[float, Callable[[random.Random, Target], BadRequest]]] = [
        (0.62, invocation),
        (0.12, malformed_http),
        (0.12, other_route),
        (0.14, control_request if target.multi_model else invocation),
    ]
    weights = [weight for weight, _ in kinds]
    makers = [make for _, make in kinds]
    for _ in range(count - len(fixed)):
        make = rng.choices(makers, weights)[0]
        yield make(rng, target)


def describe(request: BadRequest) -> str:
    """One line for a failure report: the label and the start of the bytes sent."""
    wire = request.wire()
    return f"{request.label}: {wire[:120]!r}" + ("..." if len(wire) > 120 else "")
