"""Predict over REST: row (``instances``) and columnar (``inputs``) requests and responses.

A row request answers ``{"predictions": ...}``, one entry per batch row (an object per row
when the signature has several outputs); a columnar request answers ``{"outputs": ...}``,
each tensor whole. String outputs whose alias ends in ``_bytes`` are written as
``{"b64": ...}`` objects.

Each input is a JSON value made a tensor of the signature's dtype with TF Serving's shape
and type rules (``build_tensor``): nested lists give the shape (every list of a level the same
length, values all at one level); each value must suit the dtype: numbers for numeric types
(integers within the type's range), booleans for bool, strings or ``{"b64": ...}`` objects for
string. Plain numeric lists go through NumPy in C; the element-by-element walk finds the
error otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from tensorflow.core.framework import types_pb2

from sagemaker_tfs.model_server.errors import ServingError, invalid_argument
from sagemaker_tfs.model_server.rest.json_reader import decode_b64, is_b64_object
from sagemaker_tfs.model_server.rest.json_writer import json_value_error
from sagemaker_tfs.model_server.serving.signatures import ServableSignature, short_dtype_name
from sagemaker_tfs.wire.tensors import numpy_dtype
from sagemaker_tfs.wire.tfs_json import (
    B64_KEY,
    TensorJsonError,
    debug_string,
    json_kind,
    predict_answer_pieces,
)

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


# --------------------------------------------------------------------------- tensors

MAX_DIMS = 64  # NumPy's limit on the number of array dimensions

_FLOAT_TYPES = (
    types_pb2.DT_FLOAT,
    types_pb2.DT_DOUBLE,
    types_pb2.DT_HALF,
    types_pb2.DT_BFLOAT16,
)
_INT_RANGES = {
    types_pb2.DT_INT8: (-(2**31), 2**31 - 1),
    types_pb2.DT_INT16: (-(2**31), 2**31 - 1),
    types_pb2.DT_INT32: (-(2**31), 2**31 - 1),
    types_pb2.DT_INT64: (-(2**63), 2**63 - 1),
    types_pb2.DT_UINT8: (0, 2**32 - 1),
    types_pb2.DT_UINT16: (0, 2**32 - 1),
    types_pb2.DT_UINT32: (0, 2**32 - 1),
    types_pb2.DT_UINT64: (0, 2**64 - 1),
}
# The dtypes a JSON request may carry (TF Serving's); their NumPy types are wire/tensors.py's.
_JSON_TYPES = frozenset((*_FLOAT_TYPES, *_INT_RANGES, types_pb2.DT_BOOL, types_pb2.DT_STRING))


class _ShapeError(Exception):
    """A list of the wrong size: reported as is, not per element."""


class ElementTypeError(Exception):
    """A value of the wrong type, in element ``index`` of the outermost list."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(index, message)
        self.index = index
        self.message = message


def build_tensor(value: Any, dtype: int) -> np.ndarray:
    """A (nested) JSON value as an array of ``dtype``; raises ServingError on a ragged list.

    Type errors raise ``ElementTypeError`` for the caller to wrap.
    """
    if dtype not in _JSON_TYPES:
        raise invalid_argument(f"Type {short_dtype_name(dtype)} is not supported in JSON requests")
    fast = _numeric_fast_path(value, dtype)
    if fast is not None:
        return fast
    state = _WalkState()
    try:
        _walk(value, 0, state, dtype)
    except _ShapeError as error:
        raise invalid_argument(str(error)) from None
    except RecursionError:
        raise _too_many_dims(len(state.shape)) from None
    if len(state.shape) > MAX_DIMS:
        raise _too_many_dims(len(state.shape))
    if dtype == types_pb2.DT_STRING:
        array = np.empty(len(state.flat), dtype=object)
        array[:] = state.flat
        return array.reshape(state.shape)
    return np.array(state.flat, dtype=numpy_dtype(dtype)).reshape(state.shape)


def _too_many_dims(count: int) -> ServingError:
    return invalid_argument(f"Tensor has at least {count} dimensions; at most {MAX_DIMS} allowed")


def _numeric_fast_path(value: Any, dtype: int) -> np.ndarray | None:
    """Plain lists of numbers go through NumPy in C; anything unusual returns None."""
    if dtype in (types_pb2.DT_STRING, types_pb2.DT_BOOL):
        return None
    try:
        objects = np.array(value, dtype=object)
    except ValueError:
        return None
    types = set(map(type, objects.reshape(-1).tolist()))
    if dtype in _FLOAT_TYPES:
        if not types <= {float, int}:
            return None
        try:
            return objects.astype(numpy_dtype(dtype)) if objects.size else _empty(objects, dtype)
        except (OverflowError, TypeError, ValueError):
            return None
    if types - {int}:
        return None
    if not objects.size:
        return _empty(objects, dtype)
    try:
        wide = objects.astype(np.int64)
    except OverflowError:
        return None
    low, high = _INT_RANGES[dtype]
    if wide.min() < low or wide.max() > high:
        return None
    return wide.astype(numpy_dtype(dtype))


def _empty(objects: np.ndarray, dtype: int) -> np.ndarray:
    return np.zeros(objects.shape, dtype=numpy_dtype(dtype))


class _WalkState:
    """Shape seen so far (recorded on first sight of each level) and the level of values."""

    def __init__(self) -> None:
        self.shape: list[int] = []
        self.value_level: int | None = None
        self.flat: list[Any] = []


def _walk(value: Any, level: int, state: _WalkState, dtype: int) -> None:
    """Depth-first walk checking every list against the shape TF Serving infers."""
    if isinstance(value, list):
        if state.value_level is not None and level >= state.value_level:
            raise _ShapeError(f"Encountered list at level: {level} when expecting a value")
        if level == len(state.shape):
            state.shape.append(len(value))
        elif state.shape[level] != len(value):
            raise _ShapeError(
                f"Encountered list at unexpected size: {len(value)} at level: {level} "
                f"expected size: {state.shape[level]}"
            )
        for index, item in enumerate(value):
            try:
                _walk(item, level + 1, state, dtype)
            except ElementTypeError as error:
                if level == 0:
                    raise ElementTypeError(index, error.message) from None
                raise
        return
    if state.value_level is None:
        if level < len(state.shape):
            raise _ShapeError(f"Encountered scalar element at level: {level} expecting a list")
        state.value_level = level
    elif level != state.value_level:
        raise _ShapeError(f"Encountered scalar element at level: {level} expecting a list")
    state.flat.append(_checked_scalar(value, dtype))


def _checked_scalar(value: Any, dtype: int) -> Any:
    if dtype == types_pb2.DT_STRING:
        if isinstance(value, str):
            return value.encode("utf-8", errors="surrogateescape")
        if is_b64_object(value) and isinstance(value[B64_KEY], str):
            return decode_b64(value[B64_KEY])
    elif dtype == types_pb2.DT_BOOL:
        if isinstance(value, bool):
            return value
    elif _is_number(value) and (dtype in _FLOAT_TYPES or _int_fits(value, dtype)):
        return value
    raise ElementTypeError(0, _type_error_message(value, dtype))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _int_fits(value: Any, dtype: int) -> bool:
    low, high = _INT_RANGES[dtype]
    return isinstance(value, int) and low <= value <= high


def _type_error_message(value: Any, dtype: int) -> str:
    kind = json_kind(value).capitalize()
    return (
        f"JSON Value: {debug_string(value)} Type: {kind} is not of expected type: "
        f"{short_dtype_name(dtype)}"
    )


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
