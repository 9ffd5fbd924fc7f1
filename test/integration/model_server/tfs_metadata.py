"""TF Serving's model metadata answer for a SavedModel on disk, written out from the rules of
its answer rather than by the code under test.

``GET /v1/models/NAME[/versions/N]/metadata`` answers ``{"model_spec": ..., "metadata":
{"signature_def": SignatureDefMap}}``, the map printed as protobuf's JSON mapping with the
proto field names and every field without presence printed even when empty: int64 sizes as
strings, enums by name, ``unknown_rank: false`` and empty ``name``s included, a TensorInfo's
``tensor_shape`` only when it records one. gRPC's GetModelMetadata carries the same map.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tensorflow.core.framework import types_pb2
from tensorflow.core.protobuf import meta_graph_pb2, saved_model_pb2


def _tensor_info(info: meta_graph_pb2.TensorInfo) -> dict[str, Any]:
    document: dict[str, Any] = {"dtype": types_pb2.DataType.Name(info.dtype), "name": info.name}
    if info.HasField("tensor_shape"):
        shape = info.tensor_shape
        document["tensor_shape"] = {
            "dim": [{"size": str(dim.size), "name": dim.name} for dim in shape.dim],
            "unknown_rank": shape.unknown_rank,
        }
    return document


def _signature(signature: meta_graph_pb2.SignatureDef) -> dict[str, Any]:
    assert not signature.defaults, "default input values are not written out here"
    return {
        "inputs": {alias: _tensor_info(info) for alias, info in signature.inputs.items()},
        "outputs": {alias: _tensor_info(info) for alias, info in signature.outputs.items()},
        "method_name": signature.method_name,
        "defaults": {},
    }


def signature_def_map(version_dir: Path) -> dict[str, Any]:
    """The ``signature_def`` metadata of the SavedModel in ``version_dir`` (tag ``serve``)."""
    saved_model = saved_model_pb2.SavedModel.FromString(
        (version_dir / "saved_model.pb").read_bytes()
    )
    (meta_graph,) = [m for m in saved_model.meta_graphs if "serve" in m.meta_info_def.tags]
    signatures = meta_graph.signature_def
    return {"signature_def": {key: _signature(value) for key, value in signatures.items()}}
