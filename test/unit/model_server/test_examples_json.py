"""examples_json: classify/regress ``examples`` as serialized tf.Examples and their JSON results."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from sagemaker_tfs.model_server.rest import examples_json as ej
from sagemaker_tfs.model_server.rest.examples_windows import read_document
from sagemaker_tfs.model_server.rest.json_reader import parse_json_object
from sagemaker_tfs.model_server.serving.classify_regress import (
    Classified,
    classification_result,
    regression_result,
)
from sagemaker_tfs.wire.tfs_json import format_floats, quote, render_document
from tensorflow.core.example import example_pb2


def test_regress_and_classify_results_on_one_line() -> None:
    values = np.array([3.5, 4.0], dtype=np.float32)
    assert ej.format_regress_response(values) == b'{\n    "results": [3.5, 4.0]\n}'
    classes = np.array([[b"c0", b"c1"], [b"c0", "\u00e9".encode()]], dtype=object)
    scores = np.array([[0.25, 0.75], [1.0, 0.1]], dtype=np.float32)
    assert (
        ej.format_classify_response((classes, scores))
        == (
            '{\n    "results": [[["c0", 0.25], ["c1", 0.75]], [["c0", 1.0], ["\u00e9", 0.1]]]\n}'
        ).encode()
    )
    assert ej.format_classify_response((None, scores)) == (
        b'{\n    "results": [[["", 0.25], ["", 0.75]], [["", 1.0], ["", 0.1]]]\n}'
    )
    assert ej.format_classify_response((classes, None)) == (
        b'{\n    "results": [[["c0", 0.0], ["c1", 0.0]], [["c0", 0.0], ["\xc3\xa9", 0.0]]]\n}'
    )


def test_answers_written_by_blocks_are_those_of_the_result_protos(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Written from the outputs a block of rows at a time (here 7), as the result protos
    were written whole (their values one by one)."""
    monkeypatch.setattr(ej, "ROWS_AT_A_TIME", 7)
    rng = np.random.default_rng(3)
    scores = rng.uniform(-5, 5, (50, 3)).astype(np.float32)
    classes = np.array([[f"k{i}".encode() for i in range(3)]] * 50, dtype=object)
    for pair in ((classes, scores), (None, scores), (classes, None), (None, scores[:, :1])):
        result = classification_result(Classified(*pair))
        rows = []
        for classified in result.classifications:
            texts = format_floats(np.array([c.score for c in classified.classes], np.float32))
            labels = [quote(c.label) for c in classified.classes]
            pairs = [f"[{label}, {t}]" for label, t in zip(labels, texts, strict=True)]
            rows.append("[" + ", ".join(pairs) + "]")
        expected = render_document("results", "[" + ", ".join(rows) + "]")
        assert ej.format_classify_response(pair) == expected
    values = scores[:, 0]
    result = regression_result(values)
    listed = np.array([r.value for r in result.regressions], dtype=np.float32)
    expected = render_document("results", "[" + ", ".join(format_floats(listed)) + "]")
    assert ej.format_regress_response(values) == expected


def test_examples_become_serialized_tf_examples() -> None:
    """The general way's examples (a parsed document's) as the windows' are: one row of
    bytes each, the context's first."""
    document = {
        "context": {"c": "ctx"},
        "examples": [{"x": 1.5, "n": [1, 2], "s": {"b64": "AAE="}}, {"x": [2, 2.5]}],
    }
    rows = read_document(document).serialized()
    assert rows.dtype.kind == "S" and rows.shape == (2,)
    first, second = (example_pb2.Example.FromString(row).features.feature for row in rows)
    assert first["c"].bytes_list.value == second["c"].bytes_list.value == [b"ctx"]
    assert first["x"].float_list.value == [1.5]
    assert first["n"].int64_list.value == [1, 2]
    assert first["s"].bytes_list.value == [b"\x00\x01"]
    assert second["x"].float_list.value == [2.0, 2.5]
    assert ej.context_bytes({"examples": []}) == b""


def test_the_documents_examples_are_let_go_of_as_they_are_read() -> None:
    """The document's objects are dropped a block of examples at a time once serialized
    (its dicts and the Input proto were held at once: a 10 MB regress body grew the model
    server 26.8x, then 17.8x): what the parsed document holds is freed by the time the
    examples are read."""
    rows = ", ".join(f'{{"x": {i / 7:.3f}, "w": "word{i}", "n": [1, 2, 3]}}' for i in range(20_000))
    body = b'{"examples": [' + rows.encode() + b"]}"
    tracemalloc.start()
    try:
        document = parse_json_object(body)
        held = tracemalloc.get_traced_memory()[0]
        examples = document["examples"]
        read = read_document(document)
        freed = held - tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(read.lengths) == 20_000
    assert examples == []
    assert freed > 2 * len(body), f"{freed / len(body):.1f}x the body freed while read"
