"""Classify and Regress as TF Serving's classifier and regressor run them around a session.

The signature needs one input, keyed ``inputs``, which takes the request's tf.Examples
serialized (context first, so example features win); its outputs must be ``classes`` and/or
``scores`` (classify) or ``outputs`` (regress), one row per example, and become a
ClassificationResult or RegressionResult. The signature's method name is checked only with
``--enable_signature_method_name_check`` (off by default, as in TF Serving since 2.4: a
TF2 SavedModel marks every signature ``tensorflow/serving/predict``).
"""

from __future__ import annotations

from typing import NamedTuple, TypeAlias

import numpy as np
from google.protobuf import text_format
from tensorflow_serving.apis import classification_pb2, input_pb2, regression_pb2

from sagemaker_tfs.model_server.errors import invalid_argument
from sagemaker_tfs.model_server.serving.signatures import (
    ServableSignature,
    datatype_of,
    short_dtype_name,
    signature_def_of,
)

PREDICT_METHOD = "tensorflow/serving/predict"
CLASSIFY_METHOD = "tensorflow/serving/classify"
REGRESS_METHOD = "tensorflow/serving/regress"
EXAMPLES_INPUT = "inputs"
CLASSIFY_CLASSES = "classes"
CLASSIFY_SCORES = "scores"
REGRESS_OUTPUT = "outputs"


_KINDS = {CLASSIFY_METHOD: "classification", REGRESS_METHOD: "regression"}


def examples_input(signature: ServableSignature, method: str, method_name_check: bool) -> str:
    """The alias of the one input of a classify/regress ``signature`` (``inputs``), checked
    as TF Serving checks it; ``method`` is CLASSIFY_METHOD or REGRESS_METHOD."""
    kind = _KINDS[method]
    if method_name_check and signature.method_name != method:
        raise invalid_argument(
            f"Expected {kind} signature method_name to be {method}. "
            f"Was: {signature.method_name}"
        )
    if len(signature.inputs) != 1:
        raise invalid_argument("Expected one input Tensor.")
    outputs = len(signature.outputs)
    if method == CLASSIFY_METHOD and outputs not in (1, 2):
        raise invalid_argument(f"Expected one or two output Tensors, found {outputs}")
    if method == REGRESS_METHOD and outputs != 1:
        raise invalid_argument("Expected one output Tensor.")
    if EXAMPLES_INPUT not in signature.inputs:
        raise invalid_argument(
            f"No {kind} inputs found in SignatureDef: {_debug_string(signature)}"
        )
    return EXAMPLES_INPUT


def classification_outputs(signature: ServableSignature) -> tuple[str, ...]:
    """The output aliases a classification reads: ``classes``, ``scores`` or both."""
    outputs = tuple(
        alias for alias in (CLASSIFY_CLASSES, CLASSIFY_SCORES) if alias in signature.outputs
    )
    if not outputs:
        raise invalid_argument(
            f"Expected classification signature outputs to contain at least one of: "
            f"{CLASSIFY_CLASSES}, {CLASSIFY_SCORES}"
        )
    return outputs


def check_regression_outputs(signature: ServableSignature) -> None:
    """A regression signature's one output is ``outputs``."""
    if REGRESS_OUTPUT not in signature.outputs:
        raise invalid_argument(
            f"No regression outputs found in SignatureDef: {_debug_string(signature)}"
        )


def _debug_string(signature: ServableSignature) -> str:
    """The SignatureDef as TF Serving quotes it in errors (protobuf text format)."""
    return text_format.MessageToString(signature_def_of(signature))


Examples: TypeAlias = "input_pb2.Input | np.ndarray"  # an Input, or its examples serialized


def serialized_examples(request_input: Examples) -> np.ndarray:
    """The request's tf.Examples as a 1-D array of serialized protos (an array is taken as
    it is: the REST reader's, ``rest/examples_windows.py``).

    With a context, each example is merged with the context the way TF Serving does it:
    the context is serialized first and the example after it, so example features win.
    """
    if isinstance(request_input, np.ndarray):
        if not request_input.size:
            raise invalid_argument("Input is empty.")
        return request_input
    kind = request_input.WhichOneof("kind")
    if kind == "example_list":
        examples = [example.SerializeToString() for example in request_input.example_list.examples]
    elif kind == "example_list_with_context":
        with_context = request_input.example_list_with_context
        context = with_context.context.SerializeToString()
        examples = [context + example.SerializeToString() for example in with_context.examples]
    else:
        raise invalid_argument("Input is empty.")
    if not examples:
        raise invalid_argument("Input is empty.")
    result = np.empty(len(examples), dtype=object)
    result[:] = examples
    return result


def _batch_rows(name: str, array: np.ndarray, num_examples: int) -> np.ndarray:
    if array.ndim == 0 or array.shape[0] != num_examples:
        raise invalid_argument(
            f"Expected {name} output batch size of {num_examples}. "
            f"Got: {array.shape[0] if array.ndim else 'a scalar'}"
        )
    return array.reshape(num_examples, -1)


class Classified(NamedTuple):
    """A classification's outputs, checked: ``classes`` (labels) and/or ``scores``, one row
    per example."""

    classes: np.ndarray | None
    scores: np.ndarray | None


def classification_arrays(num_examples: int, outputs: dict[str, np.ndarray]) -> Classified:
    """The outputs of a classification checked as TF Serving checks them, as rows."""
    classes = outputs.get(CLASSIFY_CLASSES)
    scores = outputs.get(CLASSIFY_SCORES)
    if classes is not None:
        if classes.dtype.kind not in ("O", "S", "U"):
            got = short_dtype_name(datatype_of(classes))
            raise invalid_argument(f"Expected classes Tensor of DT_STRING. Got: {got}")
        classes = _batch_rows(CLASSIFY_CLASSES, classes, num_examples)
    if scores is not None:
        if scores.dtype != np.float32:
            raise invalid_argument(
                f"Expected scores Tensor of DT_FLOAT. Got: {short_dtype_name(datatype_of(scores))}"
            )
        scores = _batch_rows(CLASSIFY_SCORES, scores, num_examples)
    if classes is not None and scores is not None and classes.shape != scores.shape:
        raise invalid_argument(
            f"Tensors class and score should match in dim_size(1). "
            f"Got {classes.shape[1]} vs. {scores.shape[1]}"
        )
    assert classes is not None or scores is not None, "classification_outputs() asked for one"
    return Classified(classes, scores)


def classification_result(classified: Classified) -> classification_pb2.ClassificationResult:
    classes, scores = classified
    result = classification_pb2.ClassificationResult()
    rows = classes if classes is not None else scores
    assert rows is not None
    num_classes = rows.shape[1]
    score_rows = scores.tolist() if scores is not None else None
    for row in range(rows.shape[0]):
        classifications = result.classifications.add()
        for column in range(num_classes):
            entry = classifications.classes.add()
            if classes is not None:
                entry.label = label_text(classes[row, column])
            if score_rows is not None:
                entry.score = score_rows[row][column]
    return result


def label_text(value: object) -> str:
    """A class label as the result holds it (bytes decoded, bad UTF-8 replaced)."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def regression_values(num_examples: int, values: np.ndarray) -> np.ndarray:
    """The output of a regression checked as TF Serving checks it, as one value a row."""
    if values.dtype != np.float32:
        raise invalid_argument(
            f"Expected output Tensor of DT_FLOAT. Got: {short_dtype_name(datatype_of(values))}"
        )
    if not (values.ndim == 1 or (values.ndim == 2 and values.shape[1] == 1)):
        raise invalid_argument(
            "Expected output Tensor shape to be either [batch_size] or [batch_size, 1] "
            f"but got {list(values.shape)}"
        )
    if values.shape[0] != num_examples:
        raise invalid_argument(
            f"Input batch size did not match output batch size: {num_examples} vs. "
            f"{values.shape[0]}"
        )
    return values.reshape(-1)


def regression_result(values: np.ndarray) -> regression_pb2.RegressionResult:
    result = regression_pb2.RegressionResult()
    for value in values.tolist():
        result.regressions.add().value = value
    return result
