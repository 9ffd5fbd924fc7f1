"""Which model, version and method a request is for (the custom attributes), and its REST URI."""

from __future__ import annotations

import re
from typing import NamedTuple

from sagemaker_tfs.model_discovery import MODEL_NAME_PATTERN
from sagemaker_tfs.wire.errors import HttpError, excerpt
from sagemaker_tfs.wire.http_headers import CUSTOM_ATTRIBUTES_HEADER, CustomAttributes

METHODS = ("predict", "classify", "regress")
_VERSION = re.compile(r"[0-9]{1,19}")
MAX_VERSION = 2**63 - 1


class ModelTarget(NamedTuple):
    """The model a request is for: its name, version (None: the latest) and TF Serving method."""

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


def model_target(attributes: CustomAttributes, default_model: str | None) -> ModelTarget:
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
    return ModelTarget(check_model_name(name), version, method)


def rest_uri(rest_port: int, target: ModelTarget) -> str:
    version = f"/versions/{target.model_version}" if target.model_version else ""
    return f"http://127.0.0.1:{rest_port}/v1/models/{target.model_name}{version}:{target.method}"
