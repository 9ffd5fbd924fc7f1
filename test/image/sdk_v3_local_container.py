"""The SageMaker Python SDK v3's local container on the image under test, as a user runs it:
``ModelBuilder(model_path=SAVED_MODEL_DIR, image_uri=IMAGE, mode=Mode.LOCAL_CONTAINER,
model_server=ModelServer.TENSORFLOW_SERVING, schema_builder=...)``, ``build()``, ``deploy()``,
``invoke()`` with the SDK's serializers, ``delete()``. Run with the v3 virtualenv's Python
(``conftest.sdk_v3_python``), ``DOCKER_HOST`` naming a podman API socket, the local-mode
settings in ``~/.sagemaker/config.yaml`` and ``docker`` / ``docker-compose`` first on ``PATH``
(see the test). Writes what it got as JSON to RESULT.

    python sdk_v3_local_container.py RESULT deploy    IMAGE MODEL_DIR LABEL VALUES_JSON
    python sdk_v3_local_container.py RESULT transform IMAGE MODEL_DIR LABEL INPUT_DIR OUTPUT_DIR

What SDK 3.27.0 does, and what this therefore does as the README tells users to:

- ``deploy()`` starts the image twice. ``LocalContainerMode`` runs it through docker-py,
  publishing 8501:8501, and probes ``http://localhost:8501/invocations`` with the schema's
  sample input; our image answers there with ``SAGEMAKER_BIND_TO_PORT=8501``. Then
  ``LocalEndpoint.create`` registers the endpoint with ``sagemaker.core``'s local session,
  which starts the image again with docker-compose on ``local.serving_port`` and waits for
  ``/ping`` there. With ``serving_port: 8501`` that second container cannot take the port
  (it stays "Created", when podman-compose gets that far before ``delete()`` ends it) and the
  ``/ping`` is the first container's answer.
- ``delete()`` stops only the docker-compose one: the docker-py container is removed here
  (``container.remove(force=True)``), or this process would not exit (the SDK follows its log
  in a non-daemon thread). The "Created" docker-compose container is removed by LABEL, which
  ``local.container_config`` puts on it.
- ``invoke()`` takes the endpoint's ``serializer`` / ``deserializer``; a NumPy *answer* cannot
  come back through it (``local_resources.py`` calls ``deserialize`` without the content type,
  then ``json.dumps`` on the result), so NumPy goes in with a JSON answer.
- ``ModelBuilder.transformer()`` is not local (its Transformer keeps the builder's AWS session,
  and a ``LocalSession`` given to the builder breaks ``build()``); ``sagemaker.core``'s
  ``Transformer`` with a ``LocalSession`` runs the built model locally (docker-compose, on
  ``local.serving_port``), given a ``base_transform_job_name`` (otherwise it asks AWS for the
  model's image to name the job). Its container exits and stays; it is removed by LABEL.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import requests
from sagemaker.core.local import LocalSession
from sagemaker.core.serializers import CSVSerializer, NumpySerializer
from sagemaker.core.transformer import Transformer
from sagemaker.serve import ModelBuilder
from sagemaker.serve.builder.schema_builder import SchemaBuilder
from sagemaker.serve.mode.function_pointers import Mode
from sagemaker.serve.utils.types import ModelServer

import docker

ROLE = "arn:aws:iam::111111111111:role/NotUsedInLocalMode"
# Without it, build() asks STS for the account to name a default bucket; nothing is uploaded.
S3_MODEL_DATA_URL = "s3://not-used-in-local-mode/model-builder"
SAMPLE_INPUT = {"instances": [1.0, 2.0, 5.0]}
SAMPLE_OUTPUT = {"predictions": [3.5, 4.0, 5.5]}


def model_builder(image: str, model_dir: str, env_vars: dict[str, str]) -> ModelBuilder:
    return ModelBuilder(
        model_path=model_dir,
        image_uri=image,
        mode=Mode.LOCAL_CONTAINER,
        model_server=ModelServer.TENSORFLOW_SERVING,
        schema_builder=SchemaBuilder(SAMPLE_INPUT, SAMPLE_OUTPUT),
        env_vars=env_vars,
        role_arn=ROLE,
        s3_model_data_url=S3_MODEL_DATA_URL,
    )


def answer(endpoint, body) -> object:  # noqa: ANN001 (the SDK's LocalEndpoint)
    return json.loads(endpoint.invoke(body=body).body.read())


def error_answer(endpoint, body) -> dict:  # noqa: ANN001
    """The SDK raises on a 4xx; the container's answer is the cause's HTTP response."""
    try:
        endpoint.invoke(body=body)
    except Exception as error:  # noqa: BLE001 (the SDK raises a bare Exception)
        cause = error.__cause__
        assert isinstance(cause, requests.HTTPError), repr(error)
        return {"status": cause.response.status_code, "body": cause.response.json()}
    raise AssertionError("the SDK did not raise on a bad input")


def predictions(endpoint, values: list[float]) -> dict:  # noqa: ANN001
    answers = {"json": answer(endpoint, {"instances": values})}
    endpoint.serializer = CSVSerializer()
    answers["csv"] = answer(endpoint, [[value] for value in values])
    endpoint.serializer = NumpySerializer()
    answers["npy"] = answer(endpoint, np.array(values, np.float32))
    answers["error"] = error_answer(endpoint, np.array(["not a number"]))
    return answers


def remove_labelled(label: str) -> None:
    key, _, value = label.partition("=")
    client = docker.from_env()
    for container in client.containers.list(all=True, filters={"label": f"{key}={value}"}):
        container.remove(force=True)


def deploy(image: str, model_dir: str, label: str, values_json: str) -> dict:
    builder = model_builder(image, model_dir, {"SAGEMAKER_BIND_TO_PORT": "8501"})
    builder.build()
    endpoint = builder.deploy()
    try:
        return predictions(endpoint, json.loads(values_json))
    finally:
        endpoint.delete()
        endpoint.local_container_mode_obj.container.remove(force=True)
        remove_labelled(label)


def transform(image: str, model_dir: str, label: str, input_dir: str, output_dir: str) -> dict:
    """The container listens on 8080 here: docker-compose maps ``local.serving_port`` to it."""
    model = model_builder(image, model_dir, {}).build()
    transformer = Transformer(
        model.model_name,
        instance_count=1,
        instance_type="local",
        strategy="MultiRecord",
        assemble_with="Line",
        accept="text/csv",
        output_path=f"file://{output_dir}",
        base_transform_job_name="half-plus-three",
        sagemaker_session=LocalSession(),
    )
    try:
        transformer.transform(
            f"file://{input_dir}", content_type="text/csv", split_type="Line", logs=False
        )
    finally:
        remove_labelled(label)
    return {"job": transformer.latest_transform_job.get_name()}


if __name__ == "__main__":
    result, command, *args = sys.argv[1:]
    answers = {"deploy": deploy, "transform": transform}[command](*args)
    with open(result, "w") as file:
        json.dump(answers, file)
