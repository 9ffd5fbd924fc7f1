"""sagemaker_tfs.wire.signatures: a SignatureDef read as the fast path and the client see it."""

from __future__ import annotations

from sagemaker_tfs.wire import protos
from sagemaker_tfs.wire.signatures import Signature, TensorSpec, shape_of, signature_from_def

DT_FLOAT, DT_STRING = 1, 7


def tensor_info(dims: list[int] | None = None, unknown_rank: bool = False) -> object:
    info = protos.TensorInfo(name="graph_tensor:0", dtype=DT_FLOAT)
    if dims is not None:
        info.tensor_shape.SetInParent()
        for size in dims:
            info.tensor_shape.dim.add(size=size)
    if unknown_rank:
        info.tensor_shape.unknown_rank = True
    return info


def test_a_signature_def_is_read_by_alias() -> None:
    definition = protos.SignatureDef(method_name="tensorflow/serving/predict")
    definition.inputs["x"].CopyFrom(tensor_info([-1, 3]))
    definition.outputs["y"].CopyFrom(tensor_info([-1]))
    assert signature_from_def("serving_default", definition) == Signature(
        name="serving_default",
        method_name="tensorflow/serving/predict",
        inputs={"x": TensorSpec("x", DT_FLOAT, (-1, 3))},
        outputs={"y": TensorSpec("y", DT_FLOAT, (-1,))},
    )


def test_no_shape_at_all_means_unknown_rank_as_tf_serving_feeds_it() -> None:
    assert shape_of(tensor_info()) is None


def test_unknown_rank_is_unknown_rank() -> None:
    assert shape_of(tensor_info([], unknown_rank=True)) is None


def test_a_present_but_empty_shape_is_a_scalar() -> None:
    assert shape_of(tensor_info([])) == ()


def test_string_specs() -> None:
    assert TensorSpec("s", DT_STRING, (-1,)).is_string
    assert not TensorSpec("f", DT_FLOAT, (-1,)).is_string
