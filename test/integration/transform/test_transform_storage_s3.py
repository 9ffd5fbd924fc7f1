"""S3Prefix and ManifestFile inputs and S3 outputs, through moto's S3 server (no AWS here;
test/s3_server.py) reached by the driver's real boto3 via AWS_ENDPOINT_URL_S3."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from s3_server import S3Server, s3_server
from sagemaker_tfs.transform import storage
from sagemaker_tfs.transform.endpoint_client import EndpointClient
from sagemaker_tfs.transform.job import TransformJob, resolve
from sagemaker_tfs.transform.runner import JobFailed, Runner
from scripted_endpoint import ScriptedEndpoint


@pytest.fixture
def s3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Server]:
    with s3_server(tmp_path) as server:
        for name, value in server.env.items():
            monkeypatch.setenv(name, value)
        storage.s3_client.cache_clear()
        yield server
    storage.s3_client.cache_clear()


def run(endpoint: ScriptedEndpoint, source: str, output: str, **fields: object) -> None:
    job = TransformJob(
        source,
        output,
        "application/jsonlines",
        endpoint=endpoint.url,
        progress="none",
        split_type="Line",
        assemble_with="Line",
        **fields,
    )  # type: ignore[arg-type]
    client = EndpointClient(endpoint.url, job.content_type, None, 5, job.invocations_max_retries)
    try:
        Runner(resolve(job, client.execution_parameters()), client).run()
    finally:
        client.close()


def put(s3: S3Server, bucket: str, objects: dict[str, bytes]) -> None:
    client = s3.client()
    client.create_bucket(Bucket=bucket)
    for key, body in objects.items():
        client.put_object(Bucket=bucket, Key=key, Body=body)


def test_s3_prefix_in_s3_out_keeps_relative_names(s3: S3Server, endpoint: ScriptedEndpoint) -> None:
    put(
        s3,
        "input-bucket",
        {
            "jobs/in/a.jsonl": b"a1\na2\n",
            "jobs/in/deep/b.jsonl": b"b1\n",
            "jobs/in/": b"",  # a "directory" placeholder: not an input
            "jobs/other/c.jsonl": b"never\n",
        },
    )
    s3.client().create_bucket(Bucket="output-bucket")
    run(endpoint, "s3://input-bucket/jobs/in/", "s3://output-bucket/results/")
    assert sorted(s3.keys("output-bucket")) == ["results/a.jsonl.out", "results/deep/b.jsonl.out"]
    assert s3.read("output-bucket", "results/a.jsonl.out") == b"A1\nA2\n"
    assert b"never\n" not in endpoint.attempts


def test_gzip_objects_from_a_manifest(
    s3: S3Server, endpoint: ScriptedEndpoint, tmp_path: Path
) -> None:
    put(
        s3,
        "input-bucket",
        {
            "data/day1/x.jsonl.gz": gzip.compress(b"x1\nx2\n"),
            "data/day2/y.jsonl.gz": gzip.compress(b"y1\n"),
            "data/day2/z.jsonl.gz": gzip.compress(b"not listed\n"),
            "in.manifest": json.dumps(
                [{"prefix": "s3://input-bucket/data/"}, "day1/x.jsonl.gz", "day2/y.jsonl.gz"]
            ).encode(),
        },
    )
    run(
        endpoint,
        "s3://input-bucket/in.manifest",
        str(tmp_path / "out"),
        manifest=True,
        compression="Gzip",
    )
    assert (tmp_path / "out" / "day1" / "x.jsonl.gz.out").read_bytes() == b"X1\nX2\n"
    assert (tmp_path / "out" / "day2" / "y.jsonl.gz.out").read_bytes() == b"Y1\n"
    assert len(list((tmp_path / "out").rglob("*.out"))) == 2


def test_a_failed_job_uploads_nothing_for_the_failed_object(
    s3: S3Server, endpoint: ScriptedEndpoint
) -> None:
    put(s3, "bucket-1", {"in/a.jsonl": b"ok\n", "in/b.jsonl": b"ok\npoison\nok\n"})
    with pytest.raises(JobFailed, match="s3://bucket-1/in/b.jsonl: record 2: HTTP 500"):
        run(endpoint, "s3://bucket-1/in/", "s3://bucket-1/out/", invocations_max_retries=0)
    assert s3.keys("bucket-1", "out/") == ["out/a.jsonl.out"]


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("s3://no-such-bucket/in/", "listing s3://no-such-bucket/in/: .*NoSuchBucket"),
        ("s3://bucket-1/missing.manifest", "reading s3://bucket-1/missing.manifest: .*NoSuchKey"),
    ],
)
def test_s3_errors_say_which_location(
    s3: S3Server, endpoint: ScriptedEndpoint, source: str, message: str
) -> None:
    put(s3, "bucket-1", {})
    with pytest.raises(storage.StorageError, match=message):
        run(endpoint, source, "s3://bucket-1/out/", manifest=source.endswith(".manifest"))
