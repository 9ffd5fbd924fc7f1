"""batching_parameters: the text-format file with TF Serving's defaults and checks."""

from __future__ import annotations

import pytest
from sagemaker_tfs.model_server.serving.batching_parameters import (
    BatchingParameters,
    parse_batching_parameters,
)


def test_parse_file_with_defaults_for_unset_fields() -> None:
    parameters = parse_batching_parameters(
        "max_batch_size { value: 128 }\n# comment\nallowed_batch_sizes: 32\n"
        "allowed_batch_sizes: 128\npad_variable_length_inputs: true\n"
    )
    assert parameters.max_batch_size == 128
    assert parameters.allowed_batch_sizes == (32, 128)
    assert parameters.pad_variable_length_inputs is True
    assert parameters.batch_timeout_micros == 0
    assert parameters.max_enqueued_batches == 10
    assert parameters == BatchingParameters(
        max_batch_size=128, allowed_batch_sizes=(32, 128), pad_variable_length_inputs=True
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "max_batch_size { value: 128 } allowed_batch_sizes: 32 allowed_batch_sizes: 64",
            "Last entry in allowed_batch_sizes must match max_batch_size; last entry was 64; "
            "expected 128",
        ),
        ("allowed_batch_sizes: 8 allowed_batch_sizes: 4", "monotonically increasing"),
        ("max_batch_sizes { value: 1 }", "Unknown field in batching parameters: max_batch_sizes"),
        ("max_batch_size { value: x }", "max_batch_size must be an integer"),
        ("num_batch_threads { value: 0 }", "num_batch_threads must be positive"),
    ],
)
def test_invalid_parameters(text: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_batching_parameters(text)
    assert message in str(caught.value)
