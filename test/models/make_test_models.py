"""Generate the project's test models (SavedModels, some with a ``model.tflite``), reproducibly
and cached.

Usage: ``python test/models/make_test_models.py [--only NAME ...] [--out DIR] [--force]``.
Fixtures call :func:`ensure_models`. Each model is written as ``OUT/<name>/<version>/`` and a
model whose directory already exists is skipped, so a warm cache costs nothing. The cache
directory is ``$SAGEMAKER_TFS_TEST_MODELS`` or ``test/.models-cache`` (gitignored).

Every model is checked to load and run in a TF1 session with tags ``{"serve"}``, the way
TF Serving loads SavedModels. TF Serving's own test models (``saved_model_*``) are made by
``tfs_models.py`` and checked against their known answers.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import flatbuffers  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from flatbuffers import flexbuffers  # noqa: E402
from tensorflow.lite.python import schema_py_generated as tflite_schema  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tfs_models  # noqa: E402  TF Serving's own test models, built with the rest

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CACHE = REPO_ROOT / "test" / ".models-cache"
SEED = 20240601
REGRESS = tf.compat.v1.saved_model.signature_constants.REGRESS_METHOD_NAME
PREDICT = tf.compat.v1.saved_model.signature_constants.PREDICT_METHOD_NAME
CLASSIFY = tf.compat.v1.saved_model.signature_constants.CLASSIFY_METHOD_NAME
IMAGE_SIZE = 224
NUM_CLASSES = 10


def default_cache_dir() -> Path:
    """Where generated models live: ``$SAGEMAKER_TFS_TEST_MODELS`` or ``test/.models-cache``."""
    return Path(os.environ.get("SAGEMAKER_TFS_TEST_MODELS") or DEFAULT_CACHE)


def _tensor_info(tensor: tf.Tensor) -> object:
    return tf.compat.v1.saved_model.utils.build_tensor_info(tensor)


def _signature(inputs: dict, outputs: dict, method: str) -> object:
    return tf.compat.v1.saved_model.signature_def_utils.build_signature_def(
        inputs={k: _tensor_info(v) for k, v in inputs.items()},
        outputs={k: _tensor_info(v) for k, v in outputs.items()},
        method_name=method,
    )


def _save_tf1_graph(export_dir: Path, build: Callable[[], dict]) -> None:
    """Build a graph with ``build()`` (returns the signature map) and save it as TF1 does."""
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.set_random_seed(SEED)
        signatures = build()
        with tf.compat.v1.Session(graph=graph) as session:
            tfs_models.write_saved_model(session, export_dir, signatures)


def _half_plus_three_graph(offset: float) -> dict:
    """y = 0.5 x + offset, with a predict signature and a tf.Example regress signature."""
    a = tf.compat.v1.Variable(0.5, name="a")
    b = tf.compat.v1.Variable(offset, name="b")
    x = tf.compat.v1.placeholder(tf.float32, shape=[None], name="x")
    y = tf.add(tf.multiply(a, x), b, name="y")
    serialized = tf.compat.v1.placeholder(tf.string, shape=[None], name="tf_example")
    features = tf.io.parse_example(
        serialized, {"x": tf.io.FixedLenFeature([1], tf.float32, default_value=[0.0])}
    )
    regressed = tf.identity(tf.add(tf.multiply(a, features["x"]), b), name="regress_y")
    return {
        "serving_default": _signature({"x": x}, {"y": y}, PREDICT),
        REGRESS: _signature({"inputs": serialized}, {"outputs": regressed}, REGRESS),
    }


def make_half_plus_three(model_dir: Path) -> None:
    """Versions 123 (y = 0.5x + 3) and 124 (y = 0.5x + 4, so tests can tell them apart)."""
    for version, offset in ((123, 3.0), (124, 4.0)):
        _save_tf1_graph(model_dir / str(version), lambda o=offset: _half_plus_three_graph(o))


def _multi_io_graph() -> dict:
    """Several typed inputs and outputs, for row/columnar, b64 and ``_bytes`` output tests.

    Inputs: ``a`` float (-1, 2), ``b`` int64 (-1,), ``s`` string (-1,).
    Outputs: ``sum`` = a[:,0] + a[:,1] + b (float), ``b_doubled`` = 2b (int64),
    ``s_bytes`` = s with ``!`` appended (string, written as b64), ``length`` = len(s) (int32).
    """
    a = tf.compat.v1.placeholder(tf.float32, shape=[None, 2], name="a")
    b = tf.compat.v1.placeholder(tf.int64, shape=[None], name="b")
    s = tf.compat.v1.placeholder(tf.string, shape=[None], name="s")
    total = tf.add(tf.reduce_sum(a, axis=1), tf.cast(b, tf.float32), name="sum")
    doubled = tf.multiply(b, tf.constant(2, tf.int64), name="b_doubled")
    echoed = tf.strings.join([s, tf.constant("!")], name="s_bytes")
    length = tf.strings.length(s, name="length")
    return {
        "serving_default": _signature(
            {"a": a, "b": b, "s": s},
            {"sum": total, "b_doubled": doubled, "s_bytes": echoed, "length": length},
            PREDICT,
        ),
        "double_only": _signature({"b": b}, {"b_doubled": doubled}, PREDICT),
    }


def make_multi_io(model_dir: Path) -> None:
    _save_tf1_graph(model_dir / "1", _multi_io_graph)


def _two_inputs_graph() -> dict:
    """y = 2a + b on float inputs of any shape (the two-input model of issue 53), as
    ``serving_default``; ``doubled``: a -> 2a."""
    a = tf.compat.v1.placeholder(tf.float32, shape=None, name="a")
    b = tf.compat.v1.placeholder(tf.float32, shape=None, name="b")
    doubled = tf.multiply(a, tf.constant(2.0), name="doubled")
    y = tf.add(doubled, b, name="y")
    return {
        "serving_default": _signature({"a": a, "b": b}, {"y": y}, PREDICT),
        "doubled": _signature({"a": a}, {"doubled": doubled}, PREDICT),
    }


def make_two_inputs(model_dir: Path) -> None:
    _save_tf1_graph(model_dir / "1", _two_inputs_graph)


def _int_doubler_graph() -> dict:
    """n -> 2n on an int64 input of any shape (issue 53's integer inputs on the bounded path)."""
    n = tf.compat.v1.placeholder(tf.int64, shape=None, name="n")
    doubled = tf.multiply(n, tf.constant(2, tf.int64), name="doubled")
    return {"serving_default": _signature({"n": n}, {"doubled": doubled}, PREDICT)}


def make_int_doubler(model_dir: Path) -> None:
    _save_tf1_graph(model_dir / "1", _int_doubler_graph)


# The dtypes the bounded text reader reads beyond float32/64 and int32/64 (issue 53), by the
# name of the signature that takes an input ``x`` of it and answers it as it is (``y``).
ECHOED_DTYPES = {
    "int8": tf.int8, "int16": tf.int16, "uint8": tf.uint8, "uint16": tf.uint16,
    "uint32": tf.uint32, "half": tf.float16, "bool": tf.bool, "string": tf.string,
}  # fmt: skip


def _dtype_echo_graph() -> dict:
    """One signature per dtype of ``ECHOED_DTYPES``: ``x`` of any shape -> ``y`` = x;
    ``serving_default`` is the string one."""
    signatures = {}
    for name, dtype in ECHOED_DTYPES.items():
        x = tf.compat.v1.placeholder(dtype, shape=None, name=f"x_{name}")
        y = tf.identity(x, name=f"y_{name}")
        signatures[name] = _signature({"x": x}, {"y": y}, PREDICT)
    signatures["serving_default"] = signatures["string"]
    return signatures


def make_dtype_echo(model_dir: Path) -> None:
    _save_tf1_graph(model_dir / "1", _dtype_echo_graph)


def _mixed_inputs_graph() -> dict:
    """A float input beside an integer one, of any shapes (issue 53's mixed dtypes):
    ``a`` (float32) -> ``a2`` = 2a, ``b`` (int64) -> ``b2`` = 2b; signature ``uint64``:
    ``x`` (uint64) -> ``y`` = x."""
    a = tf.compat.v1.placeholder(tf.float32, shape=None, name="a")
    b = tf.compat.v1.placeholder(tf.int64, shape=None, name="b")
    a2 = tf.multiply(a, tf.constant(2.0), name="a2")
    b2 = tf.multiply(b, tf.constant(2, tf.int64), name="b2")
    x = tf.compat.v1.placeholder(tf.uint64, shape=None, name="x")
    y = tf.identity(x, name="y")
    return {
        "serving_default": _signature({"a": a, "b": b}, {"a2": a2, "b2": b2}, PREDICT),
        "uint64": _signature({"x": x}, {"y": y}, PREDICT),
    }


def make_mixed_inputs(model_dir: Path) -> None:
    _save_tf1_graph(model_dir / "1", _mixed_inputs_graph)


def _shapes_graph() -> dict:
    """One input of each shape kind a TF1 SignatureDef can record, for the shape checks:
    ``any`` (a placeholder without a shape: ``unknown_rank``), ``scale`` (shape ``[]``: a true
    scalar) and ``rows`` (``[-1, 2]``: an unknown batch dimension).
    Outputs: ``doubled`` = 2 any (any's shape) and ``scaled`` = scale * rows.
    """
    anything = tf.compat.v1.placeholder(tf.float32, shape=None, name="any")
    scale = tf.compat.v1.placeholder(tf.float32, shape=[], name="scale")
    rows = tf.compat.v1.placeholder(tf.float32, shape=[None, 2], name="rows")
    doubled = tf.multiply(anything, 2.0, name="doubled")
    scaled = tf.multiply(rows, scale, name="scaled")
    inputs = {"any": anything, "scale": scale, "rows": rows}
    outputs = {"doubled": doubled, "scaled": scaled}
    return {"serving_default": _signature(inputs, outputs, PREDICT)}


def make_shapes(model_dir: Path) -> None:
    _save_tf1_graph(model_dir / "1", _shapes_graph)


class _HalfPlusTwo(tf.Module):
    """TF2 model: y = 0.5x + 2."""

    def __init__(self) -> None:
        super().__init__()
        self.a = tf.Variable(0.5, name="a")
        self.b = tf.Variable(2.0, name="b")

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="x")])
    def serve(self, x: tf.Tensor) -> dict:
        return {"y": self.a * x + self.b}


def make_half_plus_two(model_dir: Path) -> None:
    module = _HalfPlusTwo()
    tf.saved_model.save(module, str(model_dir / "1"), signatures={"serving_default": module.serve})


def _small_conv_classifier() -> tf.keras.Model:
    tf.keras.utils.set_random_seed(SEED)
    return tf.keras.Sequential(
        [
            tf.keras.Input((IMAGE_SIZE, IMAGE_SIZE, 3)),
            tf.keras.layers.Conv2D(8, 3, strides=4, activation="relu"),
            tf.keras.layers.Conv2D(16, 3, strides=4, activation="relu"),
            tf.keras.layers.GlobalAveragePooling2D(),
            tf.keras.layers.Dense(NUM_CLASSES),
        ]
    )


def _export_keras(model: tf.keras.Model, export_dir: Path, fn: Callable, spec: object) -> None:
    """Save ``fn`` over ``model`` as serving_default with Keras' ExportArchive.

    ``tf.saved_model.save`` of a tf.Module holding a Keras 3 model leaves variables that a
    TF1 session (TF Serving's way of loading) never restores; ExportArchive tracks them.
    """
    archive = tf.keras.export.ExportArchive()
    archive.track(model)
    archive.add_endpoint(name="serving_default", fn=fn, input_signature=[spec])
    archive.write_out(str(export_dir), verbose=False)


def _decode_jpeg(image: tf.Tensor) -> tf.Tensor:
    pixels = tf.io.decode_jpeg(image, channels=3)
    return tf.image.resize(pixels, [IMAGE_SIZE, IMAGE_SIZE]) / 255.0


def make_jpeg_classifier(model_dir: Path) -> None:
    """JPEG bytes in, decoded and resized in the graph, classes and probabilities out."""
    _export_jpeg_model(_small_conv_classifier(), model_dir)


def make_jpeg_mobilenet_v2(model_dir: Path) -> None:
    """The same JPEG-bytes signature over MobileNetV2: a realistic cost per image, as the
    batch-transform notebook's ResNet-50 (used by the throughput benchmark)."""
    tf.keras.utils.set_random_seed(SEED)
    net = tf.keras.applications.MobileNetV2(
        input_shape=(IMAGE_SIZE, IMAGE_SIZE, 3), weights=None, classes=1000
    )
    _export_jpeg_model(net, model_dir)


def _export_jpeg_model(net: tf.keras.Model, model_dir: Path) -> None:
    def serve(image_bytes: tf.Tensor) -> dict:
        images = tf.map_fn(
            _decode_jpeg,
            image_bytes,
            fn_output_signature=tf.TensorSpec([IMAGE_SIZE, IMAGE_SIZE, 3], tf.float32),
        )
        probabilities = tf.nn.softmax(net(images, training=False))
        return {
            "classes": tf.argmax(probabilities, axis=1, output_type=tf.int64),
            "probabilities": probabilities,
        }

    spec = tf.TensorSpec([None], tf.string, name="image_bytes")
    _export_keras(net, model_dir / "1", serve, spec)


def make_mobilenet_v2(model_dir: Path) -> None:
    tf.keras.utils.set_random_seed(SEED)
    model = tf.keras.applications.MobileNetV2(
        input_shape=(IMAGE_SIZE, IMAGE_SIZE, 3), weights=None, classes=1000
    )

    def serve(images: tf.Tensor) -> dict:
        return {"predictions": model(images, training=False)}

    spec = tf.TensorSpec([None, IMAGE_SIZE, IMAGE_SIZE, 3], tf.float32, name="input_1")
    _export_keras(model, model_dir / "1", serve, spec)


class _Detector(tf.Module):
    """YOLOv3-shaped outputs from cheap strided convolutions and pooling."""

    def __init__(self) -> None:
        super().__init__()
        rng = np.random.default_rng(SEED)
        self.stem = tf.Variable(rng.normal(0, 0.1, (4, 4, 3, 255)).astype(np.float32))

    @tf.function(input_signature=[tf.TensorSpec([None, 512, 512, 3], tf.float32, name="images")])
    def serve(self, images: tf.Tensor) -> dict:
        return self.outputs(images)

    def outputs(self, images: tf.Tensor) -> dict:
        pooled = tf.nn.avg_pool2d(images, ksize=2, strides=2, padding="VALID")  # 256
        large = tf.nn.conv2d(pooled, self.stem, strides=4, padding="SAME")  # 64
        medium = tf.nn.max_pool2d(large, ksize=2, strides=2, padding="VALID")  # 32
        small = tf.nn.max_pool2d(medium, ksize=2, strides=2, padding="VALID")  # 16
        return {"output_0": small, "output_1": medium, "output_2": large}


class _DetectorOfPixels(_Detector):
    """The same detector taking the pixels as decoded (uint8): a request 4x smaller."""

    @tf.function(input_signature=[tf.TensorSpec([None, 512, 512, 3], tf.uint8, name="images")])
    def serve(self, images: tf.Tensor) -> dict:
        return self.outputs(tf.cast(images, tf.float32))


def make_detector(model_dir: Path) -> None:
    module = _Detector()
    tf.saved_model.save(module, str(model_dir / "1"), signatures={"serving_default": module.serve})


def make_detector_uint8(model_dir: Path) -> None:
    module = _DetectorOfPixels()
    tf.saved_model.save(module, str(model_dir / "1"), signatures={"serving_default": module.serve})


def _sleeper_graph() -> dict:
    """``seconds`` (float, [-1]) in, the same out after sleeping the largest of them: a model
    call as slow as the request asks, for the timeout tests. The sleep is a dataset's
    (``SleepDataset``), so it costs no CPU and a session's deadline cancels it."""
    seconds = tf.compat.v1.placeholder(tf.float32, shape=[None], name="seconds")
    longest = tf.reduce_max(tf.concat([seconds, [0.0]], 0))
    # DatasetToSingleElement reads the dataset twice (its element, then its end): half each.
    micros = tf.cast(longest * 5e5, tf.int64)
    spec = tf.TensorSpec([None], tf.float32)
    dataset = tf.data.Dataset.from_tensors(seconds)
    slept = tf.raw_ops.SleepDataset(
        input_dataset=dataset._variant_tensor,  # noqa: SLF001 - the raw op takes the variant
        sleep_microseconds=micros,
        output_types=[spec.dtype],
        output_shapes=[spec.shape],
    )
    (element,) = tf.raw_ops.DatasetToSingleElement(
        dataset=slept, output_types=[spec.dtype], output_shapes=[spec.shape]
    )
    outputs = {"seconds": tf.identity(element, name="slept")}
    return {"serving_default": _signature({"seconds": seconds}, outputs, PREDICT)}


def make_sleeper(model_dir: Path) -> None:
    _save_tf1_graph(model_dir / "1", _sleeper_graph)


HEAVY_FEATURES = 16
HEAVY_WIDTH = 1024
HEAVY_ROUNDS = 750  # about 0.3 s for a batch of 64 rows on one core of the project's machines


def _compute_heavy_graph() -> dict:
    """``x`` (float, [-1, 16]) in, ``y`` ([-1, 1]) out after ``HEAVY_ROUNDS`` dense layers of
    width 1024 sharing one weight matrix: a model whose own compute dominates a call (about
    0.3 s for 64 rows), for the load and overload tests, with 4 MB of variables."""
    rng = np.random.default_rng(SEED)
    features, width = HEAVY_FEATURES, HEAVY_WIDTH
    w_in = tf.compat.v1.Variable(rng.standard_normal((features, width), np.float32) / 4)
    w = tf.compat.v1.Variable(rng.standard_normal((width, width), np.float32) / 32)
    w_out = tf.compat.v1.Variable(rng.standard_normal((width, 1), np.float32) / 32)
    x = tf.compat.v1.placeholder(tf.float32, shape=[None, features], name="x")

    def layer(step: tf.Tensor, hidden: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return step + 1, tf.tanh(tf.matmul(hidden, w))

    _, hidden = tf.while_loop(
        lambda step, _: step < HEAVY_ROUNDS, layer, [tf.constant(0), tf.matmul(x, w_in)]
    )
    y = tf.identity(tf.matmul(hidden, w_out), name="y")
    return {"serving_default": _signature({"x": x}, {"y": y}, PREDICT)}


def make_compute_heavy(model_dir: Path) -> None:
    _save_tf1_graph(model_dir / "1", _compute_heavy_graph)


# ----- TFLite models (``--prefer_tflite_model``), made as TF Serving's own TFLite test data -----

TFLITE_FILE = "model.tflite"
SIGNATURE_DEFS_METADATA = "signature_defs_metadata"  # the entry TF Serving reads SignatureDefs from
UNPARSABLE_SIGNATURE_DEF = b"not a SignatureDef"  # 'n' starts a field of wire type 6: no proto


def _half_plus_two_tf1_graph() -> dict:
    """y = 0.5x + 2 on ``x`` float [-1] (TF1 tensor names ``x:0`` and ``y:0``), as
    ``serving_default`` (x -> y) and as ``plus_two`` (value -> result)."""
    a = tf.compat.v1.Variable(0.5, name="a")
    b = tf.compat.v1.Variable(2.0, name="b")
    x = tf.compat.v1.placeholder(tf.float32, shape=[None], name="x")
    y = tf.add(tf.multiply(a, x), b, name="y")
    return {
        "serving_default": _signature({"x": x}, {"y": y}, PREDICT),
        "plus_two": _signature({"value": x}, {"result": y}, PREDICT),
    }


def _save_half_plus_two_with_tflite(version_dir: Path, signature_defs: Callable) -> None:
    """The TF1 SavedModel of ``_half_plus_two_tf1_graph`` and, beside it, ``model.tflite``
    converted from the same session (TFLite tensors ``x`` and ``y``, no signatures), with
    ``signature_defs(signatures)`` (key -> serialized SignatureDef, or None for no entry)
    written into its metadata as TF Serving's ``SetSignatureDefMap`` writes it."""
    graph = tf.Graph()
    with graph.as_default():
        signatures = _half_plus_two_tf1_graph()
        with tf.compat.v1.Session(graph=graph) as session:
            tfs_models.write_saved_model(session, version_dir, signatures)
            converter = tf.compat.v1.lite.TFLiteConverter.from_session(
                session, [graph.get_tensor_by_name("x:0")], [graph.get_tensor_by_name("y:0")]
            )
            model = converter.convert()
    entries = signature_defs(signatures)
    if entries is not None:
        model = with_signature_defs(model, entries)
    (version_dir / TFLITE_FILE).write_bytes(model)


def signature_defs_flexbuffer(entries: dict[str, bytes]) -> bytes:
    """A FlexBuffer map of signature key -> serialized SignatureDef, each value a FlexBuffer
    string (``fbb->String(key, serialized)`` in TFLite's ``signature_def_util.cc``)."""
    builder = flexbuffers.Builder()
    with builder.Map():
        for key, serialized in entries.items():
            builder.Key(key)
            # Builder.String takes text; a serialized proto is bytes, written as a string here.
            builder._WriteBlob(
                serialized, append_zero=True, type_=flexbuffers.Type.STRING
            )  # noqa: SLF001
    return bytes(builder.Finish())


def with_signature_defs(model: bytes, entries: dict[str, bytes]) -> bytes:
    """``model`` with a ``signature_defs_metadata`` entry whose buffer holds ``entries``."""
    root = tflite_schema.ModelT.InitFromPackedBuf(model, 0)
    buffer = tflite_schema.BufferT()
    buffer.data = np.frombuffer(signature_defs_flexbuffer(entries), np.uint8)
    root.buffers.append(buffer)
    metadata = tflite_schema.MetadataT()
    metadata.name = SIGNATURE_DEFS_METADATA
    metadata.buffer = len(root.buffers) - 1
    root.metadata = [*(root.metadata or []), metadata]
    builder = flatbuffers.Builder(len(model) + 1024)
    builder.Finish(root.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def make_half_plus_two_tflite(model_dir: Path) -> None:
    """No SignatureDefs: TF Serving generates ``serving_default`` from the tensors."""
    _save_half_plus_two_with_tflite(model_dir / "1", lambda signatures: None)


def make_half_plus_two_tflite_with_sigdef(model_dir: Path) -> None:
    """The SavedModel's two SignatureDefs in the metadata, tensor names ``x:0``/``y:0`` as the
    SavedModel records them (TF Serving matches them to TFLite's ``x``/``y``)."""
    _save_half_plus_two_with_tflite(
        model_dir / "1",
        lambda signatures: {key: proto.SerializeToString() for key, proto in signatures.items()},
    )


def make_half_plus_two_tflite_bad_sigdef(model_dir: Path) -> None:
    """A ``signature_defs_metadata`` entry whose ``serving_default`` is no SignatureDef."""
    _save_half_plus_two_with_tflite(
        model_dir / "1", lambda signatures: {"serving_default": UNPARSABLE_SIGNATURE_DEF}
    )


def make_half_plus_two_tflite_unknown_tensor(model_dir: Path) -> None:
    """``serving_default``'s input ``x`` names ``missing:0``, a tensor the model lacks."""

    def signature_defs(signatures: dict) -> dict[str, bytes]:
        broken = signatures["serving_default"]
        broken.inputs["x"].name = "missing:0"
        return {"serving_default": broken.SerializeToString()}

    _save_half_plus_two_with_tflite(model_dir / "1", signature_defs)


TFLITE_MODELS = {
    "half_plus_two_tflite": make_half_plus_two_tflite,
    "half_plus_two_tflite_with_sigdef": make_half_plus_two_tflite_with_sigdef,
    "half_plus_two_tflite_bad_sigdef": make_half_plus_two_tflite_bad_sigdef,
    "half_plus_two_tflite_unknown_tensor": make_half_plus_two_tflite_unknown_tensor,
}


def check_tflite(version_dir: Path) -> None:
    """The interpreter runs ``model.tflite`` (y = 0.5x + 2 on its tensors ``x``, ``y``)."""
    interpreter = tf.lite.Interpreter(model_path=str(version_dir / TFLITE_FILE))
    [x], [y] = interpreter.get_input_details(), interpreter.get_output_details()
    assert (x["name"], y["name"]) == ("x", "y"), (x["name"], y["name"])
    interpreter.resize_tensor_input(x["index"], [2])
    interpreter.allocate_tensors()
    interpreter.set_tensor(x["index"], np.array([1.0, 2.0], np.float32))
    interpreter.invoke()
    np.testing.assert_array_equal(interpreter.get_tensor(y["index"]), [2.5, 3.0])


MODELS: dict[str, Callable[[Path], None]] = {
    "half_plus_three": make_half_plus_three,
    "half_plus_two": make_half_plus_two,
    "multi_io": make_multi_io,
    "two_inputs": make_two_inputs,
    "int_doubler": make_int_doubler,
    "dtype_echo": make_dtype_echo,
    "mixed_inputs": make_mixed_inputs,
    "shapes": make_shapes,
    "jpeg_classifier": make_jpeg_classifier,
    "jpeg_mobilenet_v2": make_jpeg_mobilenet_v2,
    "mobilenet_v2": make_mobilenet_v2,
    "detector": make_detector,
    "detector_uint8": make_detector_uint8,
    "sleeper": make_sleeper,
    "compute_heavy": make_compute_heavy,
}
MODELS.update(TFLITE_MODELS)
MODELS.update(tfs_models.MODELS)


def _sample_jpeg() -> bytes:
    pixels = np.random.default_rng(SEED).integers(0, 256, (48, 64, 3), dtype=np.uint8)
    return tf.io.encode_jpeg(pixels).numpy()


def _sample_feeds(name: str) -> dict[str, np.ndarray]:
    """A small valid input for each model's serving_default signature."""
    if name in ("jpeg_classifier", "jpeg_mobilenet_v2"):
        return {"image_bytes": np.array([_sample_jpeg()], dtype=object)}
    if name == "mobilenet_v2":
        return {"input_1": np.zeros((1, IMAGE_SIZE, IMAGE_SIZE, 3), np.float32)}
    if name == "detector":
        return {"images": np.zeros((1, 512, 512, 3), np.float32)}
    if name == "detector_uint8":
        return {"images": np.zeros((1, 512, 512, 3), np.uint8)}
    if name == "shapes":
        rows = np.ones((1, 2), np.float32)
        return {"any": np.ones((2, 3), np.float32), "scale": np.float32(2.0), "rows": rows}
    if name == "sleeper":
        return {"seconds": np.zeros(1, np.float32)}
    if name == "compute_heavy":
        return {"x": np.ones((2, HEAVY_FEATURES), np.float32)}
    if name == "two_inputs":
        return {"a": np.ones(2, np.float32), "b": np.ones(2, np.float32)}
    if name == "int_doubler":
        return {"n": np.arange(3, dtype=np.int64)}
    if name == "mixed_inputs":
        return {"a": np.ones(2, np.float32), "b": np.arange(3, dtype=np.int64)}
    if name == "dtype_echo":
        return {"x": np.array([b"a"], dtype=object)}
    if name == "multi_io":
        strings = np.array([b"a"], dtype=object)
        return {"a": np.zeros((1, 2), np.float32), "b": np.ones(1, np.int64), "s": strings}
    return {"x": np.ones(2, np.float32)}


def check_serves_in_tf1_session(version_dir: Path, feeds: dict[str, np.ndarray]) -> None:
    """Load in a TF1 session with tags {"serve"} as TF Serving does and run serving_default.

    Running it (not only loading) catches variables the SavedModel does not restore.
    """
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        meta = tf.compat.v1.saved_model.loader.load(session, ["serve"], str(version_dir))
        signature = meta.signature_def["serving_default"]
        feed = {signature.inputs[alias].name: value for alias, value in feeds.items()}
        fetches = [info.name for info in signature.outputs.values()]
        session.run(fetches, feed)


def build_model(name: str, out_dir: Path, force: bool = False) -> Path:
    """Build one model under ``out_dir/name`` unless it exists; return its base path.

    The model is written to a temporary directory and renamed into place, so an interrupted
    run never leaves a half-written model that later runs would take as cached. When another
    process finished the same (seeded, identical) model first, its copy is kept.
    """
    target = out_dir / name
    if target.exists() and not force:
        return target
    out_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=out_dir))
    try:
        MODELS[name](staging)
        for version_dir in sorted(staging.iterdir()):
            if name in tfs_models.MODELS:
                tfs_models.check(name, version_dir)
            else:
                check_serves_in_tf1_session(version_dir, _sample_feeds(name))
            if name in TFLITE_MODELS:
                check_tflite(version_dir)
        if force and target.exists():
            shutil.rmtree(target)
        try:
            staging.rename(target)
        except OSError:
            if not target.is_dir():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def ensure_models(names: Iterable[str] | None = None, out_dir: Path | None = None) -> Path:
    """Build the named models (default: all) if missing; return the cache directory."""
    out = Path(out_dir) if out_dir else default_cache_dir()
    for name in names or MODELS:
        if name not in MODELS:
            raise KeyError(f"unknown test model {name!r}; known: {', '.join(MODELS)}")
        build_model(name, out)
    return out


def write_half_plus_two_tflite(version_dir: Path) -> Path:
    """``version_dir/model.tflite``: y = 0.5x + 2 (signature ``serving_default``, input
    ``x`` float [-1], output ``y``), the function of the half_plus_two SavedModels, for
    ``--prefer_tflite_model``."""
    module = _HalfPlusTwo()
    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [module.serve.get_concrete_function()], module
    )
    path = Path(version_dir) / "model.tflite"
    path.write_bytes(converter.convert())
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", choices=sorted(MODELS), help="model name")
    parser.add_argument("--out", type=Path, default=None, help="output directory")
    parser.add_argument("--force", action="store_true", help="rebuild models that exist")
    args = parser.parse_args(argv)
    out = args.out or default_cache_dir()
    for name in args.only or MODELS:
        path = build_model(name, out, force=args.force)
        print(f"{name}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
