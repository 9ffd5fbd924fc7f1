"""``--on-sagemaker``: the same job submitted to SageMaker Batch Transform with boto3.

``create_model`` (the image, the model.tar.gz on S3, the role, ``--env``) then
``create_transform_job`` with the job's fields under their API names. Fields the job left
unset are left out, so SageMaker asks the container's ``/execution-parameters`` as it does
for any job.
"""

from __future__ import annotations

import time
from typing import Any

from sagemaker_tfs.transform.job import TransformJob


def job_name(job: TransformJob, now: float | None = None) -> str:
    assert job.on_sagemaker is not None
    if job.on_sagemaker.job_name:
        return job.on_sagemaker.job_name
    stamp = time.strftime("%Y-%m-%d-%H-%M-%S", time.gmtime(now))
    return f"sagemaker-tfs-transform-{stamp}"


def create_model_request(job: TransformJob, name: str) -> dict[str, Any]:
    assert job.on_sagemaker is not None
    container: dict[str, Any] = {"Image": job.on_sagemaker.image, "ModelDataUrl": job.model_dir}
    if job.env:
        container["Environment"] = dict(job.env)
    return {
        "ModelName": name,
        "PrimaryContainer": container,
        "ExecutionRoleArn": job.on_sagemaker.role_arn,
    }


def create_transform_job_request(job: TransformJob, name: str) -> dict[str, Any]:
    assert job.on_sagemaker is not None
    data_type = "ManifestFile" if job.manifest else "S3Prefix"
    transform_input: dict[str, Any] = {
        "DataSource": {"S3DataSource": {"S3DataType": data_type, "S3Uri": job.input}},
        "ContentType": job.content_type,
        "CompressionType": job.compression,
        "SplitType": job.split_type,
    }
    transform_output: dict[str, Any] = {
        "S3OutputPath": job.output,
        "AssembleWith": job.assemble_with,
    }
    if job.accept:
        transform_output["Accept"] = job.accept
    request: dict[str, Any] = {
        "TransformJobName": name,
        "ModelName": name,
        "TransformInput": transform_input,
        "TransformOutput": transform_output,
        "TransformResources": {
            "InstanceType": job.on_sagemaker.instance_type,
            "InstanceCount": job.on_sagemaker.instance_count,
        },
        "ModelClientConfig": {
            "InvocationsTimeoutInSeconds": job.invocations_timeout,
            "InvocationsMaxRetries": job.invocations_max_retries,
        },
    }
    optional = {  # left out where unset: SageMaker then asks /execution-parameters
        "MaxConcurrentTransforms": job.max_concurrent_transforms,
        "MaxPayloadInMB": job.max_payload_mb,
        "BatchStrategy": job.batch_strategy,
        "Environment": dict(job.env) or None,
    }
    request.update({key: value for key, value in optional.items() if value is not None})
    processing = {
        "InputFilter": job.input_filter,
        "OutputFilter": job.output_filter,
        "JoinSource": job.join_source if job.join_source != "None" else None,
    }
    if any(processing.values()):
        request["DataProcessing"] = {key: value for key, value in processing.items() if value}
    return request


def submit(job: TransformJob, client: Any = None, now: float | None = None) -> str:
    """Create the model and the transform job; returns the job's ARN."""
    if client is None:
        import boto3

        client = boto3.client("sagemaker")
    name = job_name(job, now)
    client.create_model(**create_model_request(job, name))
    return client.create_transform_job(**create_transform_job_request(job, name))["TransformJobArn"]
