"""--on-sagemaker: the exact CreateModel and CreateTransformJob requests, checked by
botocore's Stubber against the real SageMaker API model (no AWS here)."""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import Stubber
from sagemaker_tfs.transform import main as transform_main
from sagemaker_tfs.transform.job import parse_args
from sagemaker_tfs.transform.sagemaker_job import submit

ROLE = "arn:aws:iam::111122223333:role/SageMakerRole"
IMAGE = "111122223333.dkr.ecr.us-west-2.amazonaws.com/sagemaker-tensorflow-serving:2.21-cpu"
JOB_ARN = "arn:aws:sagemaker:us-west-2:111122223333:transform-job/nightly-jpeg"


def sagemaker_client() -> object:
    return boto3.client(
        "sagemaker",
        region_name="us-west-2",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )


def test_the_notebooks_job_is_submitted_with_every_field() -> None:
    job = parse_args(
        [
            "--model-dir",
            "s3://models/jpeg/model.tar.gz",
            "--input",
            "s3://data/jpg/",
            "--output",
            "s3://data/out/",
            "--content-type",
            "application/x-image",
            "--max-concurrent-transforms",
            "64",
            "--max-payload-mb",
            "1",
            "--batch-strategy",
            "SingleRecord",
            "--env",
            "SAGEMAKER_TFS_ENABLE_BATCHING=true",
            "--on-sagemaker",
            ROLE,
            "--image",
            IMAGE,
            "--instance-type",
            "ml.p3.2xlarge",
            "--instance-count",
            "2",
            "--job-name",
            "nightly-jpeg",
            "--invocations-timeout",
            "120",
            "--invocations-max-retries",
            "1",
        ]
    )
    client = sagemaker_client()
    stubber = Stubber(client)
    stubber.add_response(
        "create_model",
        {"ModelArn": "arn:aws:sagemaker:us-west-2:111122223333:model/nightly-jpeg"},
        {
            "ModelName": "nightly-jpeg",
            "PrimaryContainer": {
                "Image": IMAGE,
                "ModelDataUrl": "s3://models/jpeg/model.tar.gz",
                "Environment": {"SAGEMAKER_TFS_ENABLE_BATCHING": "true"},
            },
            "ExecutionRoleArn": ROLE,
        },
    )
    stubber.add_response(
        "create_transform_job",
        {"TransformJobArn": JOB_ARN},
        {
            "TransformJobName": "nightly-jpeg",
            "ModelName": "nightly-jpeg",
            "MaxConcurrentTransforms": 64,
            "MaxPayloadInMB": 1,
            "BatchStrategy": "SingleRecord",
            "Environment": {"SAGEMAKER_TFS_ENABLE_BATCHING": "true"},
            "ModelClientConfig": {"InvocationsTimeoutInSeconds": 120, "InvocationsMaxRetries": 1},
            "TransformInput": {
                "DataSource": {
                    "S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": "s3://data/jpg/"}
                },
                "ContentType": "application/x-image",
                "CompressionType": "None",
                "SplitType": "None",
            },
            "TransformOutput": {"S3OutputPath": "s3://data/out/", "AssembleWith": "None"},
            "TransformResources": {"InstanceType": "ml.p3.2xlarge", "InstanceCount": 2},
        },
    )
    with stubber:
        assert submit(job, client) == JOB_ARN
    stubber.assert_no_pending_responses()


def test_unset_values_are_left_to_the_container_and_data_processing_is_passed() -> None:
    job = parse_args(
        [
            "--model-dir",
            "s3://models/m.tar.gz",
            "--manifest",
            "s3://data/in.manifest",
            "--output",
            "s3://data/out",
            "--content-type",
            "text/csv",
            "--accept",
            "text/csv",
            "--split-type",
            "Line",
            "--compression",
            "Gzip",
            "--assemble-with",
            "Line",
            "--input-filter",
            "$[1:]",
            "--output-filter",
            "$[0,-1]",
            "--join-source",
            "Input",
            "--on-sagemaker",
            ROLE,
            "--image",
            IMAGE,
        ]
    )
    client = sagemaker_client()
    stubber = Stubber(client)
    name = "sagemaker-tfs-transform-2026-11-23-12-00-00"
    stubber.add_response(
        "create_model",
        {"ModelArn": "arn:aws:sagemaker:us-west-2:111122223333:model/m"},
        {
            "ModelName": name,
            "ExecutionRoleArn": ROLE,
            "PrimaryContainer": {"Image": IMAGE, "ModelDataUrl": "s3://models/m.tar.gz"},
        },
    )
    stubber.add_response(
        "create_transform_job",
        {"TransformJobArn": JOB_ARN},
        {
            "TransformJobName": name,
            "ModelName": name,
            "ModelClientConfig": {"InvocationsTimeoutInSeconds": 600, "InvocationsMaxRetries": 3},
            "TransformInput": {
                "DataSource": {
                    "S3DataSource": {"S3DataType": "ManifestFile", "S3Uri": "s3://data/in.manifest"}
                },
                "ContentType": "text/csv",
                "CompressionType": "Gzip",
                "SplitType": "Line",
            },
            "TransformOutput": {
                "S3OutputPath": "s3://data/out",
                "Accept": "text/csv",
                "AssembleWith": "Line",
            },
            "TransformResources": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1},
            "DataProcessing": {
                "InputFilter": "$[1:]",
                "OutputFilter": "$[0,-1]",
                "JoinSource": "Input",
            },
        },
    )
    with stubber:
        assert submit(job, client, now=1795435200.0) == JOB_ARN  # 2026-11-23 12:00:00 UTC
    stubber.assert_no_pending_responses()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"--input": "/local/dir"}, "needs --input/--manifest as an s3:// URI"),
        ({"--model-dir": "models"}, "--model-dir s3://BUCKET/KEY/model.tar.gz"),
    ],
)
def test_local_paths_cannot_go_to_sagemaker(
    change: dict[str, str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    options = {
        "--model-dir": "s3://m/model.tar.gz",
        "--input": "s3://d/in",
        "--output": "s3://d/o",
        "--content-type": "text/csv",
        "--on-sagemaker": ROLE,
        "--image": IMAGE,
    } | change
    argv = [part for pair in options.items() for part in pair]
    assert transform_main.main(argv) == 2
    assert message in capsys.readouterr().err
