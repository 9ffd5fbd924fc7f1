"""Classify and regress over REST: ``examples`` as tf.Example protos, results as JSON.

Each example is an object of features; a feature's value (or list of values) becomes a
bytes list (strings, ``{"b64": ...}`` objects), an int64 list (integers) or a float list
(numbers). An optional ``context`` object is one more example, shared by all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from tensorflow.core.example import example_pb2, feature_pb2
from tensorflow_serving.apis import classification_pb2, input_pb2, regression_pb2

from sagemaker_tfs.model_server.errors import invalid_argument
from sagemaker_tfs.model_server.rest.json_reader import decode_b64, is_b64_object
from sagemaker_tfs.model_server.rest.json_writer import json_value_error
from sagemaker_tfs.wire.tfs_json import B64_KEY, format_floats, quote, render_document


def parse_examples_request(document: Mapping[str, Any]) -> input_pb2.Input:
    """``examples`` (+ optional ``context``) as a tensorflow.serving.Input; the document's
    ``examples`` list is emptied as it is read (each object dropped once it is an Example)."""
    if "examples" not in document:
        raise invalid_argument("Missing 'examples' key")
    examples = document["examples"]
    if not isinstance(examples, list):
        raise json_value_error(document, "Expecting 'examples' to be an list/array")
    request_input = input_pb2.Input()
    if "context" in document:
        context = document["context"]
        if not isinstance(context, dict):
            raise json_value_error(document, "Expecting 'context' to be an object")
        target = request_input.example_list_with_context
        _fill_example(context, target.context)
    else:
        target = request_input.example_list
    for index, example in enumerate(examples):
        if not isinstance(example, dict):
            raise json_value_error(example, "Example must be JSON object but got JSON ")
        _fill_example(example, target.examples.add())
        examples[index] = None  # the document's object let go of once it is an Example
    return request_input


def _fill_example(features: Mapping[str, Any], example: example_pb2.Example) -> None:
    for name, value in features.items():
        _fill_feature(name, value, example.features.feature[name])


def _fill_feature(name: str, value: Any, feature: feature_pb2.Feature) -> None:
    values = value if isinstance(value, list) else [value]
    if not values:
        return
    if all(isinstance(v, str) or is_b64_object(v) for v in values):
        feature.bytes_list.value.extend(_feature_bytes(v) for v in values)
    elif all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        feature.int64_list.value.extend(values)
    elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        feature.float_list.value.extend(values)
    else:
        raise json_value_error(value, f"Feature: {name} has values of unsupported or mixed types")


def _feature_bytes(value: Any) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8", errors="surrogateescape")
    return decode_b64(value[B64_KEY])


def format_regress_response(result: regression_pb2.RegressionResult) -> bytes:
    """``{"results": [v, ...]}`` with every value on one line."""
    values = np.array([r.value for r in result.regressions], dtype=np.float32)
    return render_document("results", "[" + ", ".join(format_floats(values)) + "]")


def format_classify_response(result: classification_pb2.ClassificationResult) -> bytes:
    """``{"results": [[["label", score], ...], ...]}`` with every list on one line."""
    rows = []
    for classifications in result.classifications:
        scores = format_floats(np.array([c.score for c in classifications.classes], np.float32))
        pairs = [
            f"[{quote(c.label)}, {score}]"
            for c, score in zip(classifications.classes, scores, strict=True)
        ]
        rows.append("[" + ", ".join(pairs) + "]")
    return render_document("results", "[" + ", ".join(rows) + "]")
