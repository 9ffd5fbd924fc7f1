"""Reliability suite: real whole stacks (nginx, gunicorn, model servers) under faults and load.

Bounded by default (a few kills of each kind, a short load run: a few minutes in CI); the
full figures with ``SAGEMAKER_TFS_RELIABILITY=long`` (100 kills of each kind, 64 clients for
10 minutes). Every test prints figure lines (``faults: ...``, ``load: ...``), collected here
and repeated at the end of the run, so they can be read from CI's log.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration" / "stack"))

from whole_stack import Stack, StackError, launch  # noqa: E402

LONG = os.environ.get("SAGEMAKER_TFS_RELIABILITY", "").strip().lower() == "long"
_FIGURES: list[str] = []


@dataclass(frozen=True)
class Budget:
    """How much of each experiment to run."""

    kills_per_kind: int
    model_server_kills: int
    stream_kills: int
    load_clients: int
    load_seconds: float


def _budget(env: dict[str, str]) -> Budget:
    """CI's bounded run, or the long one; single figures can be overridden for a shorter
    long run (``SAGEMAKER_TFS_RELIABILITY_KILLS``, ``..._MODEL_SERVER_KILLS``,
    ``..._STREAM_KILLS``, ``..._LOAD_CLIENTS``, ``..._LOAD_SECONDS``)."""
    if env.get("SAGEMAKER_TFS_RELIABILITY", "").strip().lower() == "long":
        budget = Budget(100, 100, 20, 64, 600.0)
    else:
        budget = Budget(3, 3, 3, 8, 20.0)

    def pick(name: str, default: float) -> float:
        value = env.get(f"SAGEMAKER_TFS_RELIABILITY_{name}")
        return float(value) if value else default

    return Budget(
        kills_per_kind=int(pick("KILLS", budget.kills_per_kind)),
        model_server_kills=int(pick("MODEL_SERVER_KILLS", budget.model_server_kills)),
        stream_kills=int(pick("STREAM_KILLS", budget.stream_kills)),
        load_clients=int(pick("LOAD_CLIENTS", budget.load_clients)),
        load_seconds=pick("LOAD_SECONDS", budget.load_seconds),
    )


BUDGET = _budget(dict(os.environ))


@pytest.fixture(scope="session")
def budget() -> Budget:
    return BUDGET


def report(line: str) -> None:
    """Print a figure line now and again in the summary at the end of the run."""
    print(line, flush=True)
    _FIGURES.append(line)


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    if _FIGURES:
        terminalreporter.section("reliability figures")
        for line in _FIGURES:
            terminalreporter.write_line(line)


INFERENCE_SCRIPT = '''
"""Calls the model server as users do: REST at context.rest_uri, or gRPC (context.channel)."""
import json

import numpy as np
import requests

from sagemaker_tfs.client import predict


def handler(data, context):
    body = json.loads(data.read().decode("utf-8"))
    if "grpc" in context.custom_attributes:
        outputs = predict(context, {"x": np.asarray(body["instances"], np.float32)})
        return json.dumps({"predictions": outputs["y"].tolist()}), "application/json"
    response = requests.post(context.rest_uri, json=body, timeout=30)
    response.raise_for_status()
    return response.content, "application/json"
'''


@pytest.fixture(scope="session")
def plain_models(resources_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """half_plus_three and no inference.py: JSON goes through njs, NumPy through the fast path."""
    root = tmp_path_factory.mktemp("plain-models")
    shutil.copytree(resources_dir / "models" / "half_plus_three", root / "half_plus_three")
    return root


@pytest.fixture(scope="session")
def scripted_models(resources_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """half_plus_three with a code/inference.py calling the model server over REST or gRPC."""
    root = tmp_path_factory.mktemp("scripted-models")
    shutil.copytree(resources_dir / "models" / "half_plus_three", root / "half_plus_three")
    (root / "code").mkdir()
    (root / "code" / "inference.py").write_text(INFERENCE_SCRIPT)
    return root


class Stacks:
    """Starts stacks and stops every one of them at the end (even after a failure)."""

    def __init__(self, factory: pytest.TempPathFactory) -> None:
        self._factory = factory
        self._stacks: list[Stack] = []

    def start(self, model_dir: Path, env: dict[str, str] | None = None) -> Stack:
        stack = launch(model_dir, self._factory.mktemp("stack"), env)
        self._stacks.append(stack)
        stack.wait_for_ping()
        return stack

    def stop_all(self) -> None:
        for stack in self._stacks:
            try:
                stack.stop()
            except StackError:
                pass
            finally:
                stack.kill_session()


@pytest.fixture
def stacks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stacks]:
    started = Stacks(tmp_path_factory)
    yield started
    started.stop_all()
