"""examples_json: classify/regress ``examples`` as tf.Example protos and their JSON results."""

from __future__ import annotations

from sagemaker_tfs.model_server.rest import examples_json as ej
from tensorflow_serving.apis import classification_pb2, regression_pb2


def test_regress_and_classify_results_on_one_line() -> None:
    regression = regression_pb2.RegressionResult()
    for value in (3.5, 4.0):
        regression.regressions.add().value = value
    assert ej.format_regress_response(regression) == b'{\n    "results": [3.5, 4.0]\n}'
    classification = classification_pb2.ClassificationResult()
    for scores in ((0.25, 0.75), (1.0,)):
        classes = classification.classifications.add()
        for index, score in enumerate(scores):
            classes.classes.add(label=f"c{index}", score=score)
    assert ej.format_classify_response(classification) == (
        b'{\n    "results": [[["c0", 0.25], ["c1", 0.75]], [["c0", 1.0]]]\n}'
    )


def test_examples_become_tf_example_protos() -> None:
    document = {
        "context": {"c": "ctx"},
        "examples": [{"x": 1.5, "n": [1, 2], "s": {"b64": "AAE="}}, {"x": [2, 2.5]}],
    }
    request_input = ej.parse_examples_request(document)
    listing = request_input.example_list_with_context
    assert listing.context.features.feature["c"].bytes_list.value == [b"ctx"]
    first = listing.examples[0].features.feature
    assert first["x"].float_list.value == [1.5]
    assert first["n"].int64_list.value == [1, 2]
    assert first["s"].bytes_list.value == [b"\x00\x01"]
    assert listing.examples[1].features.feature["x"].float_list.value == [2.0, 2.5]
    plain = ej.parse_examples_request({"examples": [{"x": 1.0}]})
    assert plain.WhichOneof("kind") == "example_list"
