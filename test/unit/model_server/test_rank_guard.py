"""Which signature inputs reach a kernel that needs their rank (``rank_guard``)."""

from __future__ import annotations

import tensorflow as tf
from sagemaker_tfs.model_server.serving.rank_guard import rank_strict_inputs


def test_inputs_reaching_a_convolution_in_the_graph_or_a_called_function() -> None:
    graph = tf.Graph()
    with graph.as_default():
        images = tf.compat.v1.placeholder(tf.float32, [None, 4, 4, 1], name="images")
        scale = tf.compat.v1.placeholder(tf.float32, [None], name="scale")
        pooled_input = tf.compat.v1.placeholder(tf.float32, [None, 4, 4, 1], name="pooled")
        kernel = tf.ones([2, 2, 1, 1])
        tf.nn.conv2d(tf.identity(images), kernel, 1, "VALID")
        tf.multiply(scale, 2.0)

        @tf.function
        def pool(x: tf.Tensor) -> tf.Tensor:
            return tf.nn.max_pool2d(x, 2, 1, "VALID")

        pool(pooled_input)
    signatures = {
        "serving_default": {"images": "images:0", "scale": "scale:0"},
        "pool": {"x": "pooled:0"},
        "broken": {"nothing": "no_such_tensor:0"},
    }
    assert rank_strict_inputs(graph, signatures) == {
        "serving_default": {"images": "Conv2D"},
        "pool": {"x": "MaxPool"},
    }
