"""Which model, version and method a request is for, and which model server instance serves it."""

from __future__ import annotations

import itertools
import re
import threading
import time
from collections.abc import Sequence
from typing import NamedTuple

from sagemaker_tfs.config import MODEL_NAME_PATTERN, Instance
from sagemaker_tfs.wire.errors import HttpError, excerpt
from sagemaker_tfs.wire.http_headers import CUSTOM_ATTRIBUTES_HEADER, CustomAttributes

METHODS = ("predict", "classify", "regress")
_VERSION = re.compile(r"[0-9]{1,19}")
MAX_VERSION = 2**63 - 1


class Route(NamedTuple):
    model_name: str
    model_version: str | None
    method: str


def valid_version(text: str) -> bool:
    """A TF Serving version: decimal digits that fit an int64."""
    return bool(_VERSION.fullmatch(text)) and int(text) <= MAX_VERSION


def check_model_name(name: str) -> str:
    if not MODEL_NAME_PATTERN.fullmatch(name):
        raise HttpError(400, f"Invalid model name: {excerpt(name)}")
    return name


def route(attributes: CustomAttributes, default_model: str | None) -> Route:
    """The TF Serving target of a request; 400 for names, versions or methods that are wrong."""
    name = attributes.model_name or default_model
    if not name:
        raise HttpError(400, f"No model name: set tfs-model-name in {CUSTOM_ATTRIBUTES_HEADER}")
    version = attributes.model_version
    if version is not None and not valid_version(version):
        raise HttpError(400, f"Invalid model version: {excerpt(version)}")
    method = attributes.method or "predict"
    if method not in METHODS:
        raise HttpError(
            400, f"Invalid method: {excerpt(method)} (expected predict, classify or regress)"
        )
    return Route(check_model_name(name), version, method)


def rest_uri(rest_port: int, target: Route) -> str:
    version = f"/versions/{target.model_version}" if target.model_version else ""
    return f"http://127.0.0.1:{rest_port}/v1/models/{target.model_name}{version}:{target.method}"


class InstancePicker:
    """Round-robin over the model server instances (thread- and greenlet-safe).

    An instance that could not be reached is tried last for ``down_seconds``, so that while a
    model server restarts, requests go to the live ones first instead of failing over each
    time.
    """

    def __init__(self, instances: Sequence[Instance], down_seconds: float = 1.0) -> None:
        if not instances:
            raise ValueError("no model server instance configured")
        self._instances = tuple(instances)
        self._cycle = itertools.cycle(range(len(self._instances)))
        self._lock = threading.Lock()
        self._down_seconds = down_seconds
        self._down_until: dict[Instance, float] = {}

    @property
    def instances(self) -> tuple[Instance, ...]:
        return self._instances

    def next(self) -> Instance:
        with self._lock:
            return self._instances[next(self._cycle)]

    def rotation(self) -> tuple[Instance, ...]:
        """Every instance once, starting with the next one in turn (the failover order);
        those marked down recently come last."""
        now = time.monotonic()
        with self._lock:
            start = next(self._cycle)
            down = {i for i, until in self._down_until.items() if until > now}
        turn = self._instances[start:] + self._instances[:start]
        return tuple(i for i in turn if i not in down) + tuple(i for i in turn if i in down)

    def mark_down(self, instance: Instance) -> None:
        """``instance`` could not be reached: try it last for a while."""
        with self._lock:
            self._down_until[instance] = time.monotonic() + self._down_seconds
