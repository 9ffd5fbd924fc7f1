"""Predict over REST: row (``instances``) and columnar (``inputs``) requests and responses.

A row request answers ``{"predictions": ...}``, one entry per batch row (an object per row
when the signature has several outputs); a columnar request answers ``{"outputs": ...}``,
each tensor whole. String outputs whose alias ends in ``_bytes`` are written as
``{"b64": ...}`` objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from sagemaker_tfs.model_server.errors import invalid_argument
from sagemaker_tfs.model_server.rest.json_reader import is_b64_object
from sagemaker_tfs.model_server.rest.json_tensors import ElementTypeError, build_tensor
from sagemaker_tfs.model_server.rest.json_writer import debug_string, json_value_error
from sagemaker_tfs.model_server.serving.signatures import ServableSignature
from sagemaker_tfs.wire.tfs_json import TensorJsonError, predict_answer_pieces

INSTANCES_KEY = "instances"
INPUTS_KEY = "inputs"

# --------------------------------------------------------------------------- request


def parse_predict_request(
    document: Mapping[str, Any], signature: ServableSignature
) -> tuple[dict[str, np.ndarray], bool]:
    """Inputs of a predict request as arrays, and whether the request was columnar."""
    has_instances = INSTANCES_KEY in document
    if has_instances and INPUTS_KEY in document:
        raise json_value_error(
            document,
            "Not formatted correctly expecting only one of 'inputs' or 'instances' keys to exist ",
        )
    if has_instances:
        return _parse_instances(document, signature), False
    if INPUTS_KEY in document:
        return _parse_inputs(document[INPUTS_KEY], signature), True
    raise invalid_argument("Missing 'inputs' or 'instances' key")


def _is_named_object(value: Any) -> bool:
    return isinstance(value, dict) and not is_b64_object(value)


def _parse_instances(
    document: Mapping[str, Any], signature: ServableSignature
) -> dict[str, np.ndarray]:
    instances = document[INSTANCES_KEY]
    if not isinstance(instances, list):
        raise json_value_error(document, "Expecting 'instances' to be an list/array")
    if not instances:
        raise json_value_error(document, "No values in 'instances' array")
    if not signature.inputs:
        return {}  # e.g. a counter's "get_counter": nothing to feed
    if _is_named_object(instances[0]):
        return _parse_named_instances(instances, signature)
    if len(signature.inputs) > 1:
        raise invalid_argument(
            "instances is a plain list, but expecting list of objects as multiple input "
            "tensors required as per tensorinfo_map"
        )
    alias, spec = next(iter(signature.inputs.items()))
    try:
        return {alias: build_tensor(instances, spec.dtype)}
    except ElementTypeError as error:
        raise invalid_argument(
            f"Failed to process element: {error.index} of 'instances' list. "
            f"Error: INVALID_ARGUMENT: {error.message}"
        ) from None


def _parse_named_instances(
    instances: list[Any], signature: ServableSignature
) -> dict[str, np.ndarray]:
    columns: dict[str, list[Any]] = {alias: [] for alias in signature.inputs}
    for index, instance in enumerate(instances):
        if not _is_named_object(instance):
            raise invalid_argument(f"Expecting object but got list at item {index} of input list")
        for key, value in instance.items():
            if key not in columns:
                raise invalid_argument(
                    f"Failed to process element: {index} key: {key} of 'instances' list. "
                    f"Error: INVALID_ARGUMENT: JSON object: does not have named input: {key}"
                )
            columns[key].append(value)
        if len(instance) != len(columns):
            raise invalid_argument(
                f"Failed to process element: {index} of 'instances' list. JSON object: "
                f"{debug_string(instance)} keys must be equal to: {len(columns)}"
            )
    tensors = {}
    for alias, values in columns.items():
        try:
            tensors[alias] = build_tensor(values, signature.inputs[alias].dtype)
        except ElementTypeError as error:
            raise invalid_argument(
                f"Failed to process element: {error.index} key: {alias} of 'instances' list. "
                f"Error: INVALID_ARGUMENT: {error.message}"
            ) from None
    return tensors


def _parse_inputs(value: Any, signature: ServableSignature) -> dict[str, np.ndarray]:
    if not signature.inputs:
        return {}
    if _is_named_object(value):
        named = value
        for alias in signature.inputs:
            if alias not in named:
                raise invalid_argument(f"Missing named input: {alias} in 'inputs' object.")
    elif len(signature.inputs) > 1:
        raise invalid_argument(
            "inputs is a plain value/list, but expecting an object as multiple input "
            "tensors required as per tensorinfo_map"
        )
    else:
        named = {next(iter(signature.inputs)): value}
    tensors = {}
    for alias, spec in signature.inputs.items():
        try:
            tensors[alias] = build_tensor(named[alias], spec.dtype)
        except ElementTypeError as error:
            raise invalid_argument(error.message) from None
    return tensors


# --------------------------------------------------------------------------- response


def format_predict_response(outputs: Mapping[str, Any], columnar: bool) -> bytearray:
    """``{"predictions": ...}`` (row request) or ``{"outputs": ...}`` (columnar request),
    its pieces added to one buffer as they are written (not all held, then joined). A scalar
    string output (which TensorFlow's session gives as a bytes object) is a 0-d array; a
    ``JoinedStrings`` is sliced into arrays a block at a time by the writer."""
    arrays = {
        alias: np.array(value, dtype=object) if isinstance(value, bytes) else value
        for alias, value in outputs.items()
    }
    answer = bytearray()
    try:
        for piece in predict_answer_pieces(arrays, columnar):
            answer += piece
        return answer
    except TensorJsonError as error:
        raise invalid_argument(str(error)) from None
