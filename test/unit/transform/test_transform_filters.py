"""InputFilter / JoinSource / OutputFilter on the examples of SageMaker's documentation."""

from __future__ import annotations

import json

import pytest
from sagemaker_tfs.transform.filters import DataProcessing, FilterError, compile_path


def processing(
    content_type: str = "application/json",
    accept: str = "application/json",
    input_filter: str | None = None,
    output_filter: str | None = None,
    join: str = "None",
) -> DataProcessing:
    return DataProcessing.build(content_type, accept, input_filter, output_filter, join)


def test_csv_input_filter_drops_the_id_column() -> None:
    p = processing("text/csv", "text/csv", input_filter="$[1:]")
    assert p.filter_input(b'id-7,1.5,2.5,"a,b"') == b'1.5,2.5,"a,b"'


def test_json_input_filter_picks_the_features() -> None:
    p = processing(input_filter="$.features")
    assert p.filter_input(b'{"id": 1, "features": [0.5, 2]}') == b"[0.5,2]"


def test_csv_join_then_keep_the_id_and_the_prediction() -> None:
    p = processing("text/csv", "text/csv", "$[1:]", "$[0,-1]", "Input")
    assert p.per_record_output
    assert p.process_output(b"id-7,1.5,2.5", b"0.93") == b"id-7,0.93"


def test_json_join_puts_the_answer_under_sagemaker_output() -> None:
    p = processing(output_filter="$['id','SageMakerOutput']", join="Input")
    line = p.process_output(b'{"id": 3, "features": [1]}', b'{"predictions": [3.5]}')
    assert json.loads(line) == {"id": 3, "SageMakerOutput": {"predictions": [3.5]}}


def test_json_array_input_gets_the_answer_appended() -> None:
    p = processing(join="Input")
    assert p.process_output(b"[1, 2]", b"[3.5]") == b"[1,2,[3.5]]"


def test_output_filter_alone_reshapes_the_answer() -> None:
    p = processing(output_filter="$.predictions[0]")
    assert p.process_output(b"{}", b'{"predictions": [[0.1, 0.9]]}') == b"[0.1,0.9]"


@pytest.mark.parametrize("expression", ["$..price", "$.items[?(@.a > 1)]", "items", "$["])
def test_paths_outside_sagemakers_subset_are_refused(expression: str) -> None:
    with pytest.raises(FilterError, match="--input-filter"):
        compile_path(expression, "--input-filter")


@pytest.mark.parametrize(
    ("p", "record", "answer", "message"),
    [
        (processing(join="Input"), b"not json", b"{}", "the input is not JSON"),
        (processing(join="Input"), b"{}", b"<html>", "the answer is not JSON"),
        (processing(join="Input"), b'"text"', b"{}", "neither an object nor an array"),
        (processing(output_filter="$.missing"), b"{}", b'{"a": 1}', "matches nothing"),
        (processing("text/csv", "text/csv", join="Input"), b"1,2", b"a\nb", "2 CSV rows"),
    ],
)
def test_records_that_do_not_fit_the_filters_say_why(
    p: DataProcessing, record: bytes, answer: bytes, message: str
) -> None:
    with pytest.raises(FilterError, match=message):
        p.process_output(record, answer)
