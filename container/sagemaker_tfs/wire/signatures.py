"""A served model's signatures as the model server's metadata describes them.

Read from the ``signature_def`` of GetModelMetadata (:mod:`sagemaker_tfs.client`) and used by
the fast path's decoders (:mod:`sagemaker_tfs.service.codecs.registry`) to decode requests into
what each input wants. No TensorFlow, Pillow or orjson: the client imports it.
"""

from __future__ import annotations

from dataclasses import dataclass

from google.protobuf.message import Message

from sagemaker_tfs.wire import tensors


@dataclass(frozen=True)
class TensorSpec:
    """One input or output of a signature: its alias, TensorFlow dtype enum and shape
    (-1 = any size in that dimension)."""

    name: str
    dtype: int
    shape: tuple[int, ...] | None  # None: unknown rank

    @property
    def is_string(self) -> bool:
        return self.dtype == tensors.DT_STRING


@dataclass(frozen=True)
class Signature:
    """A signature of a served model: inputs and outputs by alias."""

    name: str
    method_name: str
    inputs: dict[str, TensorSpec]
    outputs: dict[str, TensorSpec]


def shape_of(info: Message) -> tuple[int, ...] | None:
    """The shape of a TensorInfo; None for unknown rank.

    No ``tensor_shape`` at all (a TF1 placeholder exported without a shape, e.g. TF Serving's
    half_plus_three) means unknown rank, as ``unknown_rank`` does: any shape, as TF Serving
    feeds it. A present but empty shape is a true scalar.
    """
    shape = info.tensor_shape
    if not info.HasField("tensor_shape") or shape.unknown_rank:
        return None
    return tuple(dim.size for dim in shape.dim)


def tensor_spec(alias: str, info: Message) -> TensorSpec:
    """A TensorInfo of a SignatureDef, under its alias."""
    return TensorSpec(alias, info.dtype, shape_of(info))


def signature_from_def(alias: str, definition: Message) -> Signature:
    """A SignatureDef (tensorflow.SignatureDef) under its alias."""
    return Signature(
        name=alias,
        method_name=definition.method_name,
        inputs={name: tensor_spec(name, info) for name, info in definition.inputs.items()},
        outputs={name: tensor_spec(name, info) for name, info in definition.outputs.items()},
    )
