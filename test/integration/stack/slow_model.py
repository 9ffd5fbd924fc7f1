"""A SavedModel that takes seconds to load: its warm-up request runs a long loop.

``total = n`` counted one by one in a ``tf.while_loop``; the warm-up record asks for
``warmup_iterations`` (about 3 s per million on this machine), which the model server runs
before the version becomes AVAILABLE. Requests with a small ``n`` answer at once.
"""

from __future__ import annotations

import os
from pathlib import Path


def make_slow_loading_model(base: Path, warmup_iterations: int = 1_000_000) -> Path:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_log_pb2

    version_dir = base / "1"
    graph = tf.Graph()
    with graph.as_default():
        n = tf.compat.v1.placeholder(tf.int64, shape=[], name="n")
        _, total = tf.while_loop(
            lambda i, t: i < n,
            lambda i, t: (i + 1, t + 1.0),
            (tf.constant(0, tf.int64), tf.constant(0.0)),
        )
        signature = tf.compat.v1.saved_model.signature_def_utils.predict_signature_def(
            {"n": n}, {"total": total}
        )
        with tf.compat.v1.Session(graph=graph) as session:
            builder = tf.compat.v1.saved_model.builder.SavedModelBuilder(str(version_dir))
            builder.add_meta_graph_and_variables(
                session, ["serve"], signature_def_map={"serving_default": signature}
            )
            builder.save()
    log = prediction_log_pb2.PredictionLog()
    log.predict_log.request.model_spec.signature_name = "serving_default"
    log.predict_log.request.inputs["n"].CopyFrom(
        tf.make_tensor_proto(warmup_iterations, dtype=tf.int64)
    )
    warmup = version_dir / "assets.extra" / "tf_serving_warmup_requests"
    warmup.parent.mkdir(parents=True)
    with tf.io.TFRecordWriter(str(warmup)) as writer:
        writer.write(log.SerializeToString())
    return base
