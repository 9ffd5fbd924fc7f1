"""A TFLite model's SignatureDefs read as TF Serving's TFLite session reads them: the
``signature_defs_metadata`` FlexBuffer (its odd values as C++ reads them), the tensor-name
checks with the legacy ``:0`` fix, and the generated ``serving_default``.

The models here are flatbuffers with metadata and buffers only (no subgraph): reading the
SignatureDefs needs nothing else. The integration tests serve whole models."""

from __future__ import annotations

import logging

import flatbuffers
import numpy as np
import pytest
from flatbuffers import flexbuffers
from sagemaker_tfs.model_server.errors import Code, ServingError
from sagemaker_tfs.model_server.serving.tflite_signatures import (
    GENERATING,
    read_signature_defs,
    serving_signatures,
    tensor_map,
)
from tensorflow.core.framework import types_pb2
from tensorflow.core.protobuf import meta_graph_pb2
from tensorflow.lite.python import schema_py_generated as schema

INVALID = (
    "Invalid SignatureDefs found in TfLite model: Cannot parse signature def found in flatbuffer."
)


def model_with_buffers(*entries: tuple[str, bytes]) -> bytes:
    """A TFLite flatbuffer whose metadata entries (name, buffer data) are ``entries``."""
    model = schema.ModelT()
    model.version = 3
    model.buffers = [schema.BufferT()]  # buffer 0 is empty, as the converter writes it
    model.metadata = []
    for name, data in entries:
        buffer = schema.BufferT()
        buffer.data = np.frombuffer(data, np.uint8)
        model.buffers.append(buffer)
        metadata = schema.MetadataT()
        metadata.name = name
        metadata.buffer = len(model.buffers) - 1
        model.metadata.append(metadata)
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def signature(inputs: dict[str, str], outputs: dict[str, str]) -> meta_graph_pb2.SignatureDef:
    proto = meta_graph_pb2.SignatureDef(method_name="tensorflow/serving/predict")
    for alias, name in inputs.items():
        proto.inputs[alias].name = name
    for alias, name in outputs.items():
        proto.outputs[alias].name = name
    return proto


def detail(name: str, index: int, shape: list[int], signature_shape: list[int]) -> dict:
    return {
        "name": name,
        "index": index,
        "dtype": np.float32,
        "shape": np.array(shape, np.int32),
        "shape_signature": np.array(signature_shape, np.int32),
    }


INPUTS = tensor_map([detail("x", 0, [1], [-1]), detail("scale", 1, [], [])], "Input")
OUTPUTS = tensor_map([detail("y", 4, [1, 3], [-1, 3])], "Output")


def test_the_maker_writes_what_the_reader_reads(model_generator) -> None:
    stored = {
        "serving_default": signature({"x": "x:0"}, {"y": "y:0"}),
        "other": signature({"v": "x"}, {"w": "y"}),
    }
    entries = {key: proto.SerializeToString() for key, proto in stored.items()}
    model = model_generator.with_signature_defs(model_with_buffers(), entries)
    assert read_signature_defs(model) == stored


def test_no_entry_generates_serving_default_from_the_tensors(caplog) -> None:
    assert read_signature_defs(model_with_buffers(("min_runtime_version", b"1.5.0"))) == {}
    with caplog.at_level(logging.WARNING):
        served = serving_signatures(model_with_buffers(), INPUTS, OUTPUTS)
    assert GENERATING in caplog.text
    [(key, generated)] = served.items()
    assert key == "serving_default"
    assert generated.method_name == "tensorflow/serving/predict"
    assert {alias: info.name for alias, info in generated.inputs.items()} == {
        "x": "x",
        "scale": "scale",
    }
    assert generated.inputs["x"].dtype == types_pb2.DT_FLOAT
    assert [dim.size for dim in generated.inputs["x"].tensor_shape.dim] == [-1]
    assert [dim.size for dim in generated.inputs["scale"].tensor_shape.dim] == []
    assert [dim.size for dim in generated.outputs["y"].tensor_shape.dim] == [-1, 3]


def test_values_are_read_as_tf_servings_cpp_reads_them(model_generator) -> None:
    """A root that is not a map holds no signatures; a value that is not a string (a blob,
    as Python's ``flexbuffers.Dumps`` writes bytes) reads as an empty SignatureDef."""
    vector = bytes(flexbuffers.Dumps(["serving_default"]))
    assert read_signature_defs(model_with_buffers(("signature_defs_metadata", vector))) == {}
    blob = bytes(flexbuffers.Dumps({"serving_default": signature({}, {}).SerializeToString()}))
    read = read_signature_defs(model_with_buffers(("signature_defs_metadata", blob)))
    assert read == {"serving_default": meta_graph_pb2.SignatureDef()}


def test_a_later_entry_replaces_an_earlier_ones_key(model_generator) -> None:
    first = signature({"x": "x"}, {"y": "y"})
    second = signature({"scale": "scale"}, {"y": "y"})
    entries = [
        ("signature_defs_metadata", model_generator.signature_defs_flexbuffer({k: v}))
        for k, v in (("a", first.SerializeToString()), ("a", second.SerializeToString()))
    ]
    assert read_signature_defs(model_with_buffers(*entries)) == {"a": second}


@pytest.mark.parametrize(
    "data",
    [b"", b"\x01", None],
    ids=["empty buffer", "too short", "unparsable SignatureDef"],
)
def test_unreadable_signature_defs_fail_with_tf_servings_text(model_generator, data) -> None:
    if data is None:
        data = model_generator.signature_defs_flexbuffer({"s": b"not a SignatureDef"})
    with pytest.raises(ServingError) as caught:
        read_signature_defs(model_with_buffers(("signature_defs_metadata", data)))
    assert (caught.value.code, caught.value.message) == (Code.INVALID_ARGUMENT, INVALID)


def stored_model(model_generator, proto: meta_graph_pb2.SignatureDef) -> bytes:
    flexbuffer = model_generator.signature_defs_flexbuffer({"s": proto.SerializeToString()})
    return model_with_buffers(("signature_defs_metadata", flexbuffer))


def test_legacy_names_are_fixed_and_other_names_kept(model_generator) -> None:
    proto = signature({"a": "x:0", "b": "scale"}, {"c": "y:0"})
    served = serving_signatures(stored_model(model_generator, proto), INPUTS, OUTPUTS)
    assert served == {"s": signature({"a": "x", "b": "scale"}, {"c": "y"})}


@pytest.mark.parametrize(
    ("inputs", "outputs", "message"),
    [
        ({"a": "x:1"}, {"c": "y"}, "Signature input a references an unknown tensor"),
        ({"a": "y"}, {"c": "y"}, "Signature input a references an unknown tensor"),
        ({"a": "x"}, {"c": "x"}, "Signature output c references an unknown tensor"),
        ({"a": "x"}, {"c": "z:0"}, "Signature output c references an unknown tensor"),
    ],
)
def test_a_name_of_no_such_tensor_fails_the_load(model_generator, inputs, outputs, message) -> None:
    proto = signature(inputs, outputs)
    with pytest.raises(ServingError) as caught:
        serving_signatures(stored_model(model_generator, proto), INPUTS, OUTPUTS)
    assert (caught.value.code, caught.value.message) == (Code.INTERNAL, message)


def test_a_tensor_name_twice_is_refused() -> None:
    with pytest.raises(ServingError) as caught:
        tensor_map([detail("x", 0, [1], [-1]), detail("x", 1, [1], [-1])], "Input")
    assert caught.value.code == Code.ALREADY_EXISTS
    assert caught.value.message == "Input tensor name: x has multiple indices"
