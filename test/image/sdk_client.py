"""Calls a running container as most users do: the SageMaker Python SDK's ``Predictor`` with its
serializers and deserializers, over the SDK's local-mode runtime client (the one
``instance_type="local"`` endpoints use). Run with the SDK's own virtualenv (the SDK pins
protobuf and packaging below what the project uses); prints the answers as one JSON object.

    python sdk_client.py PORT
"""

from __future__ import annotations

import json
import sys

import numpy as np
from sagemaker.deserializers import CSVDeserializer, JSONDeserializer, NumpyDeserializer
from sagemaker.local import LocalSession
from sagemaker.local.local_session import LocalSagemakerRuntimeClient
from sagemaker.predictor import Predictor
from sagemaker.serializers import (
    CSVSerializer,
    JSONLinesSerializer,
    JSONSerializer,
    NumpySerializer,
)


def main(port: int) -> dict:
    session = LocalSession()
    session.sagemaker_runtime_client = LocalSagemakerRuntimeClient(
        {"local": {"serving_port": port}}
    )

    def predictor(serializer, deserializer) -> Predictor:
        return Predictor(
            "local-endpoint",
            sagemaker_session=session,
            serializer=serializer,
            deserializer=deserializer,
        )

    as_json = predictor(JSONSerializer(), JSONDeserializer())
    values = np.array([1.0, 2.0, 5.0], dtype=np.float32)
    return {
        "json": as_json.predict({"instances": [1.0, 2.0, 5.0]}),
        "json_list": as_json.predict([[1.0], [2.0]]),
        "custom_attributes": as_json.predict(
            [[2.0]], custom_attributes="tfs-model-name=half_plus_two"
        ),
        "csv": predictor(CSVSerializer(), JSONDeserializer()).predict([[1.0, 2.0], [5.0, 6.0]]),
        "csv_out": predictor(JSONSerializer(), CSVDeserializer()).predict([1.0, 2.0]),
        "jsonlines": predictor(JSONLinesSerializer(), JSONDeserializer()).predict(
            [[1.0, 2.0], [5.0, 6.0]]
        ),
        "npy": predictor(NumpySerializer(), NumpyDeserializer()).predict(values).tolist(),
    }


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]))))
