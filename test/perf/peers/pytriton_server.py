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
    small, heavy, image = (models[name] for name in (tf_models.SMALL, tf_models.HEAVY, tf_models.IMAGE))

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
            answer = tf_models.postprocess_predictions(small.predict(tf_models.preprocess_values(request["values"])))
            answers.append({
                "predictions": np.asarray(answer["predictions"], np.float32),
                "labels": np.asarray(answer["labels"], dtype=np.bytes_),
            })  # fmt: skip
        return answers

    config = ModelConfig(batching=False)
    config_ports = TritonConfig(http_port=http_port, grpc_port=grpc_port, metrics_port=metrics_port)
    with Triton(config=config_ports) as triton:
        triton.bind("half_plus_three", predict_small, [Tensor(name="x", dtype=np.float32, shape=(-1,))],
                    [Tensor(name="y", dtype=np.float32, shape=(-1,))], config=config)  # fmt: skip
        triton.bind("compute_heavy", predict_heavy, [Tensor(name="x", dtype=np.float32, shape=(-1, 16))],
                    [Tensor(name="y", dtype=np.float32, shape=(-1, 1))], config=config)  # fmt: skip
        triton.bind("mobilenet_v2", classify, [Tensor(name="image", dtype=np.bytes_, shape=(1,))],
                    [Tensor(name="predictions", dtype=np.float32, shape=(-1, 1000))], config=config)  # fmt: skip
        triton.bind("handlers", handlers, [Tensor(name="values", dtype=np.float32, shape=(-1,))],
                    [Tensor(name="predictions", dtype=np.float32, shape=(-1,)),
                     Tensor(name="labels", dtype=np.bytes_, shape=(-1,))], config=config)  # fmt: skip
        triton.serve()


if __name__ == "__main__":
    main()
