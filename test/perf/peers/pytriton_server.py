"""The peer Triton, through PyTriton (``nvidia-pytriton`` ships ``tritonserver`` and its
Python backend): one ``triton.bind`` per model with an inference function calling the
SavedModel, as PyTriton's examples do, and Triton's HTTP endpoint (KServe's V2 protocol with
Triton's binary tensor extension). Batching off (``ModelConfig(batching=False)``): the
scenarios send whole tensors, as to the other servers; everything else is PyTriton's default.

Usage (in the pytriton venv): python pytriton_server.py MODELS_DIR HTTP_PORT GRPC_PORT METRICS_PORT
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import tf_models  # noqa: E402
from pytriton.model_config import ModelConfig, Tensor  # noqa: E402
from pytriton.triton import Triton, TritonConfig  # noqa: E402


def main() -> None:
    models_dir, http_port, grpc_port, metrics_port = sys.argv[1], *map(int, sys.argv[2:5])
    models = tf_models.load_all(models_dir)
    small, heavy, image = (
        models[name] for name in (tf_models.SMALL, tf_models.HEAVY, tf_models.IMAGE)
    )

    def predict_small(requests):  # type: ignore[no-untyped-def]
        return [{"y": small.predict(request["x"])} for request in requests]

    def predict_heavy(requests):  # type: ignore[no-untyped-def]
        return [{"y": heavy.predict(request["x"])} for request in requests]

    def classify(requests):  # type: ignore[no-untyped-def]
        return [
            {"predictions": image.predict(tf_models.jpeg_pixels(bytes(request["image"][0])))}
            for request in requests
        ]

    def handlers(requests):  # type: ignore[no-untyped-def]
        answers = []
        for request in requests:
            answer = tf_models.postprocess_predictions(
                small.predict(tf_models.preprocess_values(request["values"]))
            )
            answers.append({
                "predictions": np.asarray(answer["predictions"], np.float32),
                "labels": np.asarray(answer["labels"], dtype=np.bytes_),
            })  # fmt: skip
        return answers

    config = ModelConfig(batching=False)
    config_ports = TritonConfig(http_port=http_port, grpc_port=grpc_port, metrics_port=metrics_port)
    with Triton(config=config_ports) as triton:
        bind(triton, "half_plus_three", predict_small, [("x", np.float32, (-1,))],
             [("y", np.float32, (-1,))], config)  # fmt: skip
        bind(triton, "compute_heavy", predict_heavy, [("x", np.float32, (-1, 16))],
             [("y", np.float32, (-1, 1))], config)  # fmt: skip
        bind(triton, "mobilenet_v2", classify, [("image", np.bytes_, (1,))],
             [("predictions", np.float32, (-1, 1000))], config)  # fmt: skip
        labelled = [("predictions", np.float32, (-1,)), ("labels", np.bytes_, (-1,))]
        bind(triton, "handlers", handlers, [("values", np.float32, (-1,))], labelled, config)
        triton.serve()


def bind(triton, name, function, inputs, outputs, config) -> None:  # type: ignore[no-untyped-def]
    """``triton.bind`` with the tensors given as (name, dtype, shape)."""
    triton.bind(
        model_name=name,
        infer_func=function,
        inputs=[Tensor(name=n, dtype=d, shape=s) for n, d, s in inputs],
        outputs=[Tensor(name=n, dtype=d, shape=s) for n, d, s in outputs],
        config=config,
    )


if __name__ == "__main__":
    main()
