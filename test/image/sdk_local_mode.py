"""The SageMaker Python SDK v2's local mode on the image under test, as a user runs it:
``TensorFlowModel(model_data="file://...", image_uri=IMAGE)``, then either
``deploy(instance_type="local")`` / predict / delete, or ``transformer(instance_type="local")``
over a folder of CSV files. Run with the SDK's own virtualenv (``conftest.sdk_python``), with
``docker`` being podman that answers ``context inspect`` and ``docker-compose`` being
podman-compose first on ``PATH``; writes what it got as JSON to RESULT (the SDK streams the
container's log to standard output, with lines cut anywhere).

    python sdk_local_mode.py RESULT deploy    IMAGE MODEL_TAR PORT LABEL
    python sdk_local_mode.py RESULT transform IMAGE MODEL_TAR PORT LABEL INPUT_DIR OUTPUT_DIR ACCEPT

``LABEL`` (``key=value``) is put on every container the SDK starts (``local.container_config``)
so that the caller can remove them afterwards: podman-compose leaves them running when the SDK
ends it.
"""

from __future__ import annotations

import json
import sys

import numpy as np
from sagemaker.deserializers import JSONDeserializer, NumpyDeserializer
from sagemaker.local import LocalSession
from sagemaker.serializers import CSVSerializer, JSONSerializer, NumpySerializer
from sagemaker.tensorflow import TensorFlowModel

ROLE = "arn:aws:iam::111111111111:role/NotUsedInLocalMode"
# With no code to upload nothing goes to S3, but without a bucket the SDK asks STS for the
# account to name its default bucket: any bucket name keeps it off the network.
CODE_LOCATION = "s3://not-used-in-local-mode/code"


def local_model(image: str, model_tar: str, port: int, label: str) -> TensorFlowModel:
    key, _, value = label.partition("=")
    session = LocalSession()
    session.config = {"local": {"serving_port": port, "container_config": {"labels": {key: value}}}}
    return TensorFlowModel(
        model_data=f"file://{model_tar}",
        role=ROLE,
        image_uri=image,
        code_location=CODE_LOCATION,
        sagemaker_session=session,
    )


def deploy(image: str, model_tar: str, port: int, label: str) -> dict:
    model = local_model(image, model_tar, port, label)
    predictor = model.deploy(initial_instance_count=1, instance_type="local")
    try:
        answers = {
            "json": predictor.predict({"instances": [1.0, 2.0, 5.0]}),
            "regress": predictor.regress(
                {"signature_name": "tensorflow/serving/regress", "examples": [{"x": 1.0}]}
            ),
        }
        predictor.serializer, predictor.deserializer = CSVSerializer(), JSONDeserializer()
        answers["csv"] = predictor.predict([[1.0], [2.0]])
        predictor.serializer, predictor.deserializer = NumpySerializer(), NumpyDeserializer()
        answers["npy"] = predictor.predict(np.array([1.0, 2.0, 5.0], np.float32)).tolist()
        predictor.serializer, predictor.deserializer = JSONSerializer(), JSONDeserializer()
    finally:
        predictor.delete_endpoint()
    return answers


def transform(
    image: str, model_tar: str, port: int, label: str, input_dir: str, output_dir: str, accept: str
) -> dict:
    model = local_model(image, model_tar, port, label)
    transformer = model.transformer(
        instance_count=1,
        instance_type="local",
        strategy="MultiRecord",
        assemble_with="Line",
        accept=accept,
        output_path=f"file://{output_dir}",
    )
    transformer.transform(
        f"file://{input_dir}", content_type="text/csv", split_type="Line", wait=True, logs=False
    )
    return {"job": transformer.latest_transform_job.name}


if __name__ == "__main__":
    result, command, image, model_tar, port, label, *rest = sys.argv[1:]
    run = {"deploy": deploy, "transform": transform}[command]
    answers = run(image, model_tar, int(port), label, *rest)
    with open(result, "w") as file:
        json.dump(answers, file)
