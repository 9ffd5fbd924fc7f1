"""The checks of a Predict request that both servables make, as TF Serving words them: the
signature's method, the inputs sent against the signature's, the outputs asked for.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sagemaker_tfs.model_server.errors import Code, ServingError, invalid_argument
from sagemaker_tfs.model_server.serving.classify_regress import (
    CLASSIFY_METHOD,
    PREDICT_METHOD,
    REGRESS_METHOD,
)
from sagemaker_tfs.model_server.serving.signatures import (
    ServableSignature,
    datatype_of,
    short_dtype_name,
)

PREDICTION_METHODS = (PREDICT_METHOD, CLASSIFY_METHOD, REGRESS_METHOD)


def check_predict_method(signature: ServableSignature, method_name_check: bool) -> None:
    """With ``--enable_signature_method_name_check``, Predict runs only signatures of the
    three serving methods (INTERNAL, as TF Serving answers); otherwise any signature."""
    if method_name_check and signature.method_name not in PREDICTION_METHODS:
        raise ServingError(
            Code.INTERNAL,
            "Expected prediction signature method_name to be one of "
            f"{{{', '.join(PREDICTION_METHODS)}}}. Was: {signature.method_name}",
        )


def check_inputs(
    signature: ServableSignature,
    inputs: dict[str, np.ndarray],
    rank_strict: dict[str, str] | None = None,
) -> None:
    """The inputs are the signature's, of its dtypes; shapes are the graph's business, but
    for inputs that reach a kernel needing their recorded rank (``rank_guard``)."""
    sent = set(inputs)
    expected = set(signature.inputs)
    if sent != expected:
        raise invalid_argument(
            f"input size does not match signature: {len(sent)}!={len(expected)} "
            f"len({{{','.join(sorted(sent))}}}) != len({{{','.join(sorted(expected))}}}). "
            f"Sent extra: {{{','.join(sorted(sent - expected))}}}. "
            f"Missing but required: {{{','.join(sorted(expected - sent))}}}."
        )
    for index, alias in enumerate(sorted(inputs)):
        spec = signature.inputs[alias]
        given = datatype_of(inputs[alias])
        if given != spec.dtype:
            raise invalid_argument(
                f"Expects arg[{index}] to be {short_dtype_name(spec.dtype)} but "
                f"{short_dtype_name(given)} is provided"
            )
        op_type = (rank_strict or {}).get(alias)
        if op_type and spec.shape is not None and inputs[alias].ndim != len(spec.shape):
            raise invalid_argument(
                f"input {alias} goes to {op_type}, which needs a {len(spec.shape)}-dimensional "
                f"input: got shape {list(inputs[alias].shape)}"
            )


def output_aliases(signature: ServableSignature, output_filter: Sequence[str]) -> tuple[str, ...]:
    if not output_filter:
        return tuple(signature.outputs)
    seen: set[str] = set()
    for alias in output_filter:
        if alias not in signature.outputs:
            raise invalid_argument(
                f"output tensor alias not found in signature: {alias} Outputs expected to be "
                f"in the set {{{','.join(signature.outputs)}}}."
            )
        if alias in seen:
            raise invalid_argument(f"duplicate output tensor alias: {alias}")
        seen.add(alias)
    return tuple(output_filter)
