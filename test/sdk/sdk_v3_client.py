"""SDK v3 (``sagemaker>=3``) as the client of a local endpoint: v3's serializers and
deserializers (``sagemaker.core``) over its local-mode runtime client
(``sagemaker.core.local.LocalSagemakerRuntimeClient``, what local endpoints use; v3's
``Endpoint.invoke`` goes to AWS only). Run with the v3 virtualenv; prints the answers as one
JSON object.

    python sdk_v3_client.py PORT
"""

from __future__ import annotations

import json
import sys

import numpy as np
from sagemaker.core.deserializers import CSVDeserializer, JSONDeserializer, NumpyDeserializer
from sagemaker.core.local.local_session import LocalSagemakerRuntimeClient
from sagemaker.core.serializers import (
    CSVSerializer,
    IdentitySerializer,
    JSONLinesSerializer,
    JSONSerializer,
    NumpySerializer,
)


def main(port: int) -> dict:
    runtime = LocalSagemakerRuntimeClient({"local": {"serving_port": port}})

    def call(serializer, deserializer, data, **kwargs):
        response = runtime.invoke_endpoint(
            Body=serializer.serialize(data),
            EndpointName="local-endpoint",
            ContentType=serializer.CONTENT_TYPE,
            Accept=deserializer.ACCEPT[0],
            **kwargs,
        )
        return deserializer.deserialize(response["Body"], response["ContentType"])

    vector = np.array([1.0, 2.0, 5.0], np.float32)
    tfs_model = {"CustomAttributes": "tfs-model-name=tfs_half_plus_three"}
    return {
        "json": call(JSONSerializer(), JSONDeserializer(), {"instances": [1.0, 2.0]}),
        "csv": call(CSVSerializer(), JSONDeserializer(), [1.0, 2.0]),
        "jsonlines": call(JSONLinesSerializer(), JSONDeserializer(), [[1.0, 2.0], [5.0, 6.0]]),
        "csv_out": call(JSONSerializer(), CSVDeserializer(), [1.0, 2.0]),
        "npy": call(NumpySerializer(), NumpyDeserializer(), vector).tolist(),
        "npy_shapeless": call(
            NumpySerializer(), NumpyDeserializer(), vector.reshape(3, 1), **tfs_model
        ).tolist(),
        "version": call(
            JSONSerializer(),
            JSONDeserializer(),
            [1.0],
            CustomAttributes="tfs-model-name=half_plus_three,tfs-model-version=124",
        ),
        "regress": call(
            JSONSerializer(),
            JSONDeserializer(),
            {"signature_name": "regress_x_to_y", "examples": [{"x": 1.0}]},
            CustomAttributes="tfs-model-name=half_plus_two,tfs-method=regress",
        ),
        "error": call(IdentitySerializer("application/x-npy"), JSONDeserializer(), b"not numpy"),
    }


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]))))
