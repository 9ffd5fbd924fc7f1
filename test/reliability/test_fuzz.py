"""Fuzz the whole stack with bad requests (``bad_requests.py``) and count what goes wrong.

Real nginx, gunicorn and model servers (``whole_stack.py``), in three set-ups: single-model,
single-model with an ``inference.py``, and multi-model with one plain model and one with its
own ``inference.py``. Each request goes over its own socket with a deadline. Goals: 0 answers
of 5xx, 0 error answers whose body is not a JSON ``{"error": ...}`` (or that are missing),
0 hangs, 0 child processes that died or were replaced, and a correct prediction afterwards.

Prints ``fuzz: N requests, F 5xx, J non-JSON errors, H hangs, D deaths``. CI runs
``FUZZ_REQUESTS`` requests; ``SAGEMAKER_TFS_RELIABILITY=long`` runs ``LONG_FUZZ_REQUESTS``.
Another seed: ``SAGEMAKER_TFS_FUZZ_SEED``. Run alone for the figures::

    pytest -q -s test/reliability/test_fuzz.py
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "test" / "integration" / "stack"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bad_requests import BadRequest, Target, describe, generate  # noqa: E402
from whole_stack import Stack, descendant_pids, running_stack  # noqa: E402

HALF_PLUS_THREE = REPO_ROOT / "test" / "resources" / "models" / "half_plus_three"
FUZZ_CODE = Path(__file__).resolve().parent / "code"
FUZZ_REQUESTS = 2000
LONG_FUZZ_REQUESTS = 10_000
REQUEST_DEADLINE_SECONDS = 30.0
# What HTTP itself answers to malformed HTTP, not failures: 501 for a Transfer-Encoding other
# than chunked, 505 for a version other than HTTP/1.x (RFC 9112). Still JSON, still checked.
PROTOCOL_5XX = (501, 505)
# Shares of the requests per set-up: single-model, with inference.py, multi-model.
SHARES = {"single": 0.4, "single+inference.py": 0.25, "multi": 0.35}

pytestmark = pytest.mark.timeout(3600)


def long_mode() -> bool:
    return os.environ.get("SAGEMAKER_TFS_RELIABILITY", "").strip().lower() == "long"


# ------------------------------------------------------------------ one exchange


@dataclass
class Answer:
    status: int | None  # None: no complete answer before the deadline or the stream's end
    headers: dict[str, str]
    body: bytes
    timed_out: bool


def _split_head(data: bytes) -> tuple[int, dict[str, str], bytes] | None:
    head, sep, rest = data.partition(b"\r\n\r\n")
    if not sep:
        return None
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers, rest


def _dechunk(data: bytes) -> bytes | None:
    """The body of a complete chunked stream; None while incomplete."""
    body, position = b"", 0
    while True:
        end = data.find(b"\r\n", position)
        if end < 0:
            return None
        size = int(data[position:end].split(b";")[0], 16)
        if size == 0:
            return body
        if len(data) < end + 2 + size + 2:
            return None
        body += data[end + 2 : end + 2 + size]
        position = end + 2 + size + 2


def _complete(data: bytes, method: str) -> Answer | None:
    """The answer in ``data`` once it is complete (None: read more)."""
    parsed = _split_head(data)
    if parsed is None:
        return None
    status, headers, rest = parsed
    if status == 100:  # Expect: 100-continue; the real answer follows
        return _complete(rest, method)
    if method == "HEAD" or status in (204, 304):
        return Answer(status, headers, b"", False)
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = _dechunk(rest)
        return None if body is None else Answer(status, headers, body, False)
    if "content-length" in headers:
        length = int(headers["content-length"])
        return Answer(status, headers, rest[:length], False) if len(rest) >= length else None
    return None  # ends with the stream


def exchange(port: int, request: BadRequest, deadline_seconds: float) -> Answer:
    """Send one request on a fresh connection and read its answer, within the deadline."""
    wire = request.wire()
    method = wire.split(b" ", 1)[0].decode("latin-1", "replace")
    deadline = time.monotonic() + deadline_seconds
    data = b""
    with socket.create_connection(("127.0.0.1", port), timeout=deadline_seconds) as sock:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(wire)  # the server may answer (413, 400) and close before the end
        while True:
            answer = _complete(data, method)
            if answer is not None:
                return answer
            left = deadline - time.monotonic()
            if left <= 0:
                return Answer(None, {}, data, True)
            sock.settimeout(left)
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                return Answer(None, {}, data, True)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                parsed = _split_head(data)
                if parsed is None:
                    return Answer(None, {}, data, False)
                status, headers, rest = parsed
                if status == 100:
                    parsed = _split_head(rest) or (None, {}, b"")
                    status, headers, rest = parsed  # type: ignore[assignment]
                return Answer(status, headers, rest, False)
            data += chunk


def json_error_problem(answer: Answer, method: str) -> str | None:
    """Why an error answer is not a proper JSON error (None when it is)."""
    if answer.status is None:
        return f"no answer ({len(answer.body)} bytes before the connection closed)"
    if answer.status < 400:
        return None
    content_type = answer.headers.get("content-type", "")
    if not content_type.startswith("application/json"):
        return f"{answer.status} with Content-Type {content_type!r}"
    if method == "HEAD":
        return None
    try:
        document = json.loads(answer.body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        return f"{answer.status} body is not JSON/UTF-8 ({error}): {answer.body[:80]!r}"
    if not isinstance(document, dict) or not isinstance(document.get("error"), str):
        return f"{answer.status} body has no error message: {answer.body[:80]!r}"
    return None


# ------------------------------------------------------------------ one run


@dataclass
class Tally:
    requests: int = 0
    server_errors: list[str] = field(default_factory=list)
    non_json: list[str] = field(default_factory=list)
    hangs: list[str] = field(default_factory=list)
    deaths: list[str] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)
    sending_seconds: float = 0.0

    def figure_line(self) -> str:
        return (
            f"fuzz: {self.requests} requests, {len(self.server_errors)} 5xx, "
            f"{len(self.non_json)} non-JSON errors, {len(self.hangs)} hangs, "
            f"{len(self.deaths)} deaths"
        )

    def problems(self) -> str:
        parts = []
        for title, items in (
            ("5xx", self.server_errors),
            ("non-JSON", self.non_json),
            ("hangs", self.hangs),
            ("deaths", self.deaths),
        ):
            parts += [f"{title}: {item}" for item in items[:15]]
        return "\n".join(parts)


def fuzz(stack: Stack, targets: list[Target], seed: int, count: int, tally: Tally) -> None:
    """Send ``count`` generated requests (split over ``targets``) and record what failed."""
    stack.wait_until_settled()
    before = set(descendant_pids(stack.process.pid))
    started = time.monotonic()
    for index, target in enumerate(targets):
        share = count // len(targets) + (index < count % len(targets))
        for request in generate(target, seed + index, share):
            answer = exchange(stack.port, request, REQUEST_DEADLINE_SECONDS)
            method = request.wire().split(b" ", 1)[0].decode("latin-1", "replace")
            tally.requests += 1
            if answer.status is not None:
                tally.statuses[answer.status] = tally.statuses.get(answer.status, 0) + 1
            where = f"[{target.model}] {describe(request)}"
            if answer.timed_out:
                tally.hangs.append(where)
            elif (
                answer.status is not None
                and answer.status >= 500
                and not (request.raw is not None and answer.status in PROTOCOL_5XX)
            ):
                tally.server_errors.append(f"{where} -> {answer.status} {answer.body[:160]!r}")
            if (problem := json_error_problem(answer, method)) is not None and not answer.timed_out:
                tally.non_json.append(f"{where} -> {problem}")
    tally.sending_seconds += time.monotonic() - started
    after = set(descendant_pids(stack.process.pid))
    if stack.process.poll() is not None:
        tally.deaths.append(f"the supervisor exited with {stack.process.returncode}")
    tally.deaths += [f"pid {pid} is gone" for pid in sorted(before - after)]
    tally.deaths += [f"new pid {pid} appeared" for pid in sorted(after - before)]


def prediction_problem(stack: Stack, path: str = "/invocations") -> list[str]:
    """[] when the stack still answers a correct prediction on ``path``."""
    response = requests.post(
        stack.url + path,
        data=b'{"instances": [1.0, 2.0]}',
        headers={"Content-Type": "application/json"},
        timeout=30,
    )
    if response.status_code == 200 and response.json().get("predictions") == [3.5, 4.0]:
        return []
    return [f"{path}: {response.status_code} {response.text[:200]}"]


# ------------------------------------------------------------------ the stacks


@contextlib.contextmanager
def single_model_stack(root: Path, with_code: bool) -> Iterator[Stack]:
    model_dir = root / "model"
    shutil.copytree(HALF_PLUS_THREE, model_dir / "half_plus_three")
    if with_code:
        shutil.copytree(FUZZ_CODE, model_dir / "code")
    work_dir = root / "work"
    work_dir.mkdir()
    with running_stack(model_dir, work_dir) as stack:
        yield stack


@contextlib.contextmanager
def multi_model_stack(root: Path) -> Iterator[tuple[Stack, list[Target]]]:
    models = root / "models"
    shutil.copytree(HALF_PLUS_THREE, models / "half_plus_three")
    shutil.copytree(HALF_PLUS_THREE, models / "with_code")
    shutil.copytree(FUZZ_CODE, models / "with_code" / "code")
    work_dir = root / "work"
    work_dir.mkdir()
    with running_stack(models, work_dir, multi_model=True) as stack:
        targets = [Target(True, "hp3", "half_plus_three"), Target(True, "coded", "with_code")]
        for target in targets:
            body = {"model_name": target.model, "url": target.models_url}
            loaded = requests.post(stack.url + "/models", json=body, timeout=180)
            assert loaded.status_code == 200, loaded.text
        yield stack, targets


def test_fuzz_whole_stack(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    total = LONG_FUZZ_REQUESTS if long_mode() else FUZZ_REQUESTS
    seed = int(os.environ.get("SAGEMAKER_TFS_FUZZ_SEED", "10"))
    counts = {mode: round(total * share) for mode, share in SHARES.items()}
    tally = Tally()
    afterwards: list[str] = []  # what is wrong after the fuzz: wrong answers, models
    started = time.monotonic()

    with single_model_stack(tmp_path / "single", with_code=False) as stack:
        fuzz(stack, [Target(False)], seed, counts["single"], tally)
        afterwards += prediction_problem(stack)
    with single_model_stack(tmp_path / "coded", with_code=True) as stack:
        fuzz(stack, [Target(False)], seed + 100, counts["single+inference.py"], tally)
        afterwards += prediction_problem(stack)
    with multi_model_stack(tmp_path / "multi") as (stack, targets):
        fuzz(stack, targets, seed + 200, counts["multi"], tally)
        for target in targets:
            afterwards += prediction_problem(stack, f"/models/{target.model}/invoke")
        listed = requests.get(stack.url + "/models", timeout=30).json()["models"]
        names = sorted(model["modelName"] for model in listed)
        if names != ["coded", "hp3"]:
            afterwards.append(f"loaded models after the fuzz: {names}")

    with capsys.disabled():
        print(f"\n{tally.figure_line()}")
        print(
            f"fuzz: seed {seed}, {time.monotonic() - started:.0f} s "
            f"({tally.sending_seconds:.0f} s sending), statuses "
            f"{dict(sorted(tally.statuses.items()))}"
        )
    assert not (tally.server_errors or tally.non_json or tally.hangs or tally.deaths), (
        tally.figure_line() + "\n" + tally.problems()
    )
    assert not afterwards, afterwards
