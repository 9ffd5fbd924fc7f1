"""TF Serving's own test models, made here (``make_test_models.py`` builds them with the rest).

TF Serving is tested with a handful of tiny SavedModels; the model server is checked against
TF Serving's behaviour on the same models. They are made here with the directory names,
versions, signature keys, method names, tensor names, dtypes, recorded shapes and values
those tests rely on (y = 0.5x + 2 or + 3):

- ``saved_model_half_plus_three/00000123``: TF1 graph; ``serving_default`` (x -> y = 0.5x + 3)
  and ``tensorflow/serving/regress`` (serialized tf.Example -> 0.5x + 3). Its TensorInfos
  record no shape at all, and the regress input claims DT_FLOAT although it takes strings,
  as in TF Serving's oldest export (TF Serving checks neither).
- ``saved_model_half_plus_two_2_versions/00000123`` and ``00000124``: TF1 graph, y = 0.5x + 2;
  ``serving_default`` plus ``regress_x_to_y`` (y), ``regress_x_to_y2`` (0.5x + 3),
  ``classify_x_to_y`` (y) on tf.Examples (``x`` required, ``x2`` defaults to 0) and
  ``regress_x2_to_y3`` / ``classify_x2_to_y3`` (0.5 x2 + 3) on the parsed ``x2`` tensor.
- ``saved_model_half_plus_two_cpu/00000123``: the same without ``classify_x2_to_y3``.
- ``saved_model_half_plus_two_tf2_cpu/00000123``: the same six signatures exported by
  ``tf.saved_model.save``, so every method name is ``tensorflow/serving/predict``; inputs of
  shape [1] (the model itself takes any length), ``serving_default``'s ``x`` defaults to [0].
- ``saved_model_counter/00000123``: a stateful TF1 model; ``get_counter``, ``incr_counter``,
  ``incr_counter_by`` (input ``delta``) and ``reset_counter`` read or change one variable and
  answer its value (reference tensors, DT_FLOAT_REF).

The TF1 ones carry an asset (``assets/foo.txt``) and an init op, as TF Serving's exports do.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import meta_graph_pb2

PREDICT = tf.compat.v1.saved_model.signature_constants.PREDICT_METHOD_NAME
REGRESS = tf.compat.v1.saved_model.signature_constants.REGRESS_METHOD_NAME
CLASSIFY = tf.compat.v1.saved_model.signature_constants.CLASSIFY_METHOD_NAME
VERSION_DIR = "00000123"
EXAMPLE_FEATURES = {
    "x": tf.io.FixedLenFeature([1], tf.float32),  # required
    "x2": tf.io.FixedLenFeature([1], tf.float32, default_value=[0.0]),
}


def _info(tensor: tf.Tensor, with_shape: bool = True) -> meta_graph_pb2.TensorInfo:
    if with_shape:
        return tf.compat.v1.saved_model.utils.build_tensor_info(tensor)
    return meta_graph_pb2.TensorInfo(name=tensor.name, dtype=tensor.dtype.as_datatype_enum)


def _signature(
    inputs: dict, outputs: dict, method: str, with_shapes: bool = True
) -> meta_graph_pb2.SignatureDef:
    return meta_graph_pb2.SignatureDef(
        inputs={alias: _info(tensor, with_shapes) for alias, tensor in inputs.items()},
        outputs={alias: _info(tensor, with_shapes) for alias, tensor in outputs.items()},
        method_name=method,
    )


def _variable(value: float, name: str) -> tf.Variable:
    """A TF1 reference variable (VariableV2), as TF1 exports have."""
    return tf.compat.v1.Variable(value, name=name, use_resource=False)


def _save_graph(export_dir: Path, build: Callable[[], dict], with_asset: bool = True) -> None:
    """Build a TF1 graph (``build()`` returns its signatures) and save it as TF1 did, with
    the asset ``foo.txt`` and an init op that assigns its name to a variable."""
    graph = tf.Graph()
    with graph.as_default(), tempfile.TemporaryDirectory(prefix="tfs-asset-") as asset_dir:
        signatures = build()
        assets, init_op = None, None
        if with_asset:
            asset = Path(asset_dir) / "foo.txt"
            asset.write_text("asset-file-contents")
            assets = [tf.constant(str(asset), name="Const")]
            filename = tf.compat.v1.Variable(
                "foo.txt", name="filename_tensor", use_resource=False, collections=[]
            )
            init_op = tf.group(tf.compat.v1.assign(filename, "foo.txt"))
        with tf.compat.v1.Session(graph=graph) as session:
            write_saved_model(session, export_dir, signatures, assets, init_op)


def write_saved_model(
    session: tf.compat.v1.Session,
    export_dir: Path,
    signatures: dict,
    assets: list | None = None,
    main_op: object = None,
) -> None:
    """The session's graph, variables initialized, as a TF1 SavedModel tagged ``serve``."""
    session.run(tf.compat.v1.global_variables_initializer())
    builder = tf.compat.v1.saved_model.Builder(str(export_dir))
    builder.add_meta_graph_and_variables(
        session,
        [tf.compat.v1.saved_model.tag_constants.SERVING],
        signature_def_map=signatures,
        assets_collection=assets,
        main_op=main_op,
        strip_default_attrs=True,
    )
    builder.save()


def _parsed(serialized: tf.Tensor, features: dict) -> dict:
    """The examples' dense features, shaped [-1, 1] as TF1 inferred them from any input."""
    parsed = tf.io.parse_example(serialized, features)
    for feature in parsed.values():
        feature.set_shape([None, 1])
    return parsed


def _half_plus_three_graph() -> dict:
    """``x`` is the parsed examples' x, so that it can be fed directly; no recorded shapes."""
    a, b, c = _variable(0.5, "a"), _variable(3.0, "b"), _variable(3.0, "c")
    serialized = tf.compat.v1.placeholder(tf.string, name="tf_example")
    x = tf.identity(_parsed(serialized, {"x": EXAMPLE_FEATURES["x"]})["x"], name="x")
    y = tf.add(tf.multiply(a, x), b, name="y")
    x2 = tf.compat.v1.placeholder(tf.float32, name="x2")
    tf.add(tf.multiply(a, x2), c, name="y2")
    regressed = tf.identity(y, name="Identity")
    regress = _signature({"inputs": serialized}, {"outputs": regressed}, REGRESS, False)
    regress.inputs["inputs"].dtype = tf.float32.as_datatype_enum  # sic: see the docstring
    return {
        "serving_default": _signature({"x": x}, {"y": y}, PREDICT, with_shapes=False),
        REGRESS: regress,
    }


def _half_plus_two_graph(with_classify_x2: bool) -> dict:
    """y = 0.5x + 2, y2 = 0.5x + 3, y3 = 0.5 x2 + 3, x and x2 parsed from tf.Examples."""
    a, b, c = _variable(0.5, "a"), _variable(2.0, "b"), _variable(3.0, "c")
    serialized = tf.compat.v1.placeholder(tf.string, name="tf_example")
    parsed = _parsed(serialized, EXAMPLE_FEATURES)
    x = tf.identity(parsed["x"], name="x")
    y = tf.add(tf.multiply(a, x), b, name="y")
    y2 = tf.add(tf.multiply(a, x), c, name="y2")
    x2 = tf.identity(parsed["x2"], name="x2")
    y3 = tf.add(tf.multiply(a, x2), c, name="y3")
    examples = {"inputs": serialized}
    signatures = {
        "serving_default": _signature({"x": x}, {"y": y}, PREDICT),
        "regress_x_to_y": _signature(examples, {"outputs": y}, REGRESS),
        "regress_x_to_y2": _signature(examples, {"outputs": y2}, REGRESS),
        "regress_x2_to_y3": _signature({"inputs": x2}, {"outputs": y3}, REGRESS),
        "classify_x_to_y": _signature(examples, {"scores": y}, CLASSIFY),
    }
    if with_classify_x2:
        signatures["classify_x2_to_y3"] = _signature({"inputs": x2}, {"scores": y3}, CLASSIFY)
    return signatures


def make_half_plus_three(model_dir: Path) -> None:
    _save_graph(model_dir / VERSION_DIR, _half_plus_three_graph)


def make_half_plus_two_2_versions(model_dir: Path) -> None:
    """The same model as versions 123 and 124 (tests tell them apart by the version only)."""
    for version in (VERSION_DIR, "00000124"):
        _save_graph(model_dir / version, lambda: _half_plus_two_graph(True))


def make_half_plus_two_cpu(model_dir: Path) -> None:
    _save_graph(model_dir / VERSION_DIR, lambda: _half_plus_two_graph(False))


class _HalfPlusTwo(tf.Module):
    """The TF2 export: the same signatures as functions of a tf.Module."""

    def __init__(self, asset: Path) -> None:
        super().__init__()
        self.a = tf.Variable(0.5, name="a")
        self.b = tf.Variable(2.0, name="b")
        self.c = tf.Variable(3.0, name="c")
        self.asset = tf.saved_model.Asset(str(asset))

    @tf.function(input_signature=[tf.TensorSpec([1], tf.float32)])
    def serving_default(self, x: tf.Tensor = tf.constant([0.0])) -> dict:  # noqa: B008
        """The default value is recorded in the SignatureDef's ``defaults``."""
        return {"y": self.a * x + self.b}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def classify_x_to_y(self, inputs: tf.Tensor) -> dict:
        return {"scores": self.a * tf.io.parse_example(inputs, EXAMPLE_FEATURES)["x"] + self.b}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def regress_x_to_y(self, inputs: tf.Tensor) -> dict:
        return {"outputs": self.a * tf.io.parse_example(inputs, EXAMPLE_FEATURES)["x"] + self.b}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def regress_x_to_y2(self, inputs: tf.Tensor) -> dict:
        return {"outputs": self.a * tf.io.parse_example(inputs, EXAMPLE_FEATURES)["x"] + self.c}

    @tf.function(input_signature=[tf.TensorSpec([1], tf.float32)])
    def classify_x2_to_y3(self, inputs: tf.Tensor) -> dict:
        return {"scores": self.a * inputs + self.c}

    @tf.function(input_signature=[tf.TensorSpec([1], tf.float32)])
    def regress_x2_to_y3(self, inputs: tf.Tensor) -> dict:
        return {"outputs": self.a * inputs + self.c}


TF2_SIGNATURES = (
    "serving_default",
    "classify_x_to_y",
    "regress_x_to_y",
    "regress_x_to_y2",
    "classify_x2_to_y3",
    "regress_x2_to_y3",
)


def make_half_plus_two_tf2_cpu(model_dir: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="tfs-asset-") as asset_dir:
        asset = Path(asset_dir) / "foo.txt"
        asset.write_text("asset-file-contents")
        module = _HalfPlusTwo(asset)
        signatures = {name: getattr(module, name) for name in TF2_SIGNATURES}
        tf.saved_model.save(module, str(model_dir / VERSION_DIR), signatures=signatures)


def _counter_graph() -> dict:
    """One float variable; the outputs are TF1's reference tensors (DT_FLOAT_REF)."""
    counter = _variable(0.0, "counter")
    with tf.name_scope("incr_counter_op"):
        incremented = tf.compat.v1.assign_add(counter, 1.0)
    delta = tf.compat.v1.placeholder(tf.float32, name="delta")
    with tf.name_scope("incr_counter_by_op"):
        incremented_by = tf.compat.v1.assign_add(counter, delta)
    with tf.name_scope("reset_counter_op"):
        reset = tf.compat.v1.assign(counter, 0.0)
    value = tf.compat.v1.get_default_graph().get_tensor_by_name("counter:0")
    return {
        "get_counter": _signature({}, {"output": value}, PREDICT),
        "incr_counter": _signature({}, {"output": incremented}, PREDICT),
        "incr_counter_by": _signature({"delta": delta}, {"output": incremented_by}, PREDICT),
        "reset_counter": _signature({}, {"output": reset}, PREDICT),
    }


def make_counter(model_dir: Path) -> None:
    _save_graph(model_dir / VERSION_DIR, _counter_graph, with_asset=False)


MODELS: dict[str, Callable[[Path], None]] = {
    "saved_model_half_plus_three": make_half_plus_three,
    "saved_model_half_plus_two_2_versions": make_half_plus_two_2_versions,
    "saved_model_half_plus_two_cpu": make_half_plus_two_cpu,
    "saved_model_half_plus_two_tf2_cpu": make_half_plus_two_tf2_cpu,
    "saved_model_counter": make_counter,
}


def examples(*xs: float, **features: list[float]) -> np.ndarray:
    """Serialized tf.Examples, one per ``x`` (with ``features`` in every one)."""
    serialized = []
    for x in xs:
        values = {"x": [x], **features}
        feature = {
            key: tf.train.Feature(float_list=tf.train.FloatList(value=value))
            for key, value in values.items()
        }
        serialized.append(
            tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()
        )
    return np.array(serialized, dtype=object)


_HALF_PLUS_TWO_ANSWERS = {
    "serving_default": ([[1.0], [2.0]], [[2.5], [3.0]]),
    "regress_x_to_y": (examples(1.0, 4.0), [[2.5], [4.0]]),
    "regress_x_to_y2": (examples(1.0, 4.0, x2=[9.0]), [[3.5], [5.0]]),
    "regress_x2_to_y3": ([[2.0]], [[4.0]]),
    "classify_x_to_y": (examples(-2.0), [[1.0]]),
}
# Per model, each signature's one input value (None: it has no input) and the answer it must
# give, in this order: the counter's answers follow from the calls before them.
ANSWERS: dict[str, dict[str, tuple[object, object]]] = {
    "saved_model_half_plus_three": {
        "serving_default": ([[1.0], [2.0]], [[3.5], [4.0]]),
        REGRESS: (examples(1.0, 4.0), [[3.5], [5.0]]),
    },
    "saved_model_half_plus_two_2_versions": {
        **_HALF_PLUS_TWO_ANSWERS,
        "classify_x2_to_y3": ([[2.0]], [[4.0]]),
    },
    "saved_model_half_plus_two_cpu": _HALF_PLUS_TWO_ANSWERS,
    "saved_model_half_plus_two_tf2_cpu": {
        "serving_default": ([2.0], [3.0]),
        "classify_x_to_y": (examples(1.0, 4.0), [[2.5], [4.0]]),
        "regress_x_to_y": (examples(1.0, 4.0), [[2.5], [4.0]]),
        "regress_x_to_y2": (examples(1.0, 4.0), [[3.5], [5.0]]),
        "classify_x2_to_y3": ([2.0], [4.0]),
        "regress_x2_to_y3": ([2.0], [4.0]),
    },
    "saved_model_counter": {
        "reset_counter": (None, 0.0),
        "incr_counter": (None, 1.0),
        "incr_counter_by": (2.5, 3.5),
        "get_counter": (None, 3.5),
    },
}


def check(name: str, version_dir: Path) -> None:
    """Loaded in a TF1 session as TF Serving loads it, every signature of the model (and no
    other) gives its answer from ANSWERS."""
    answers = ANSWERS[name]
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        meta = tf.compat.v1.saved_model.loader.load(session, ["serve"], str(version_dir))
        keys = {key for key in meta.signature_def if not key.startswith("__")}
        if keys != set(answers):
            raise AssertionError(f"{name}: signatures {sorted(keys)}, expected {sorted(answers)}")
        for key, (value, expected) in answers.items():
            signature = meta.signature_def[key]
            feed = {}
            if value is not None:
                (info,) = signature.inputs.values()
                feed[info.name] = value
            (output,) = signature.outputs.values()
            answer = session.run(output.name, feed)
            np.testing.assert_array_equal(answer, np.array(expected, np.float32), f"{name} {key}")
