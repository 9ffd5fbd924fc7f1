"""What the reliability tests share: the budget (bounded or long), figure lines, stacks."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest
from whole_stack import Stack, StackError, launch

LONG = os.environ.get("SAGEMAKER_TFS_RELIABILITY", "").strip().lower() == "long"
FIGURES: list[str] = []


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
        budget = Budget(3, 3, 2, 8, 20.0)

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


def report(line: str) -> None:
    """Print a figure line now and again in the summary at the end of the run."""
    print(line, flush=True)
    FIGURES.append(line)


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
