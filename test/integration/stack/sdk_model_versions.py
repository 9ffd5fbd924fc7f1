"""Pins model versions as SageMaker Python SDK users do: ``TensorFlowPredictor(...,
model_name=..., model_version=...)`` over the SDK's local-mode runtime client (the one
``instance_type="local"`` endpoints use). Run with the SDK's own virtualenv (the
``sdk_python`` fixture); prints the answers as one JSON object.

    python sdk_model_versions.py PORT MODEL_NAME
"""

from __future__ import annotations

import json
import sys

from sagemaker.local import LocalSession
from sagemaker.local.local_session import LocalSagemakerRuntimeClient
from sagemaker.tensorflow import TensorFlowPredictor

REGRESS = {"signature_name": "tensorflow/serving/regress", "examples": [{"x": 1.0}]}


def main(port: int, model_name: str) -> dict:
    session = LocalSession()
    session.sagemaker_runtime_client = LocalSagemakerRuntimeClient(
        {"local": {"serving_port": port}}
    )
    answers = {}
    for version in (None, "123", "124"):
        predictor = TensorFlowPredictor(
            "local-endpoint",
            sagemaker_session=session,
            model_name=model_name,
            model_version=version,
        )
        answers[f"predict {version}"] = predictor.predict({"instances": [1.0, 2.0]})
        # tfs-method=regress joined with the model's attributes by the SDK
        answers[f"regress {version}"] = predictor.regress(REGRESS)
    return answers


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]), sys.argv[2])))
