"""The batch-transform notebooks' jobs end to end against the whole stack (real nginx,
gunicorn, model server; a DT_STRING JPEG model with the notebook's ``input_handler`` in
``notebook_code/inference.py``), outputs compared record by record with direct invocations.

One stack serves the ``--endpoint`` tests (started as SageMaker starts a Batch Transform
container: ``SAGEMAKER_BATCH=true`` and the job's values); the ``--model-dir`` test runs the
command as a user would, starting and stopping its own stack, with S3 through moto.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import requests
from s3_server import s3_server
from sagemaker_tfs.transform import main as transform_main
from transform_jobs import job_flags, random_jpeg
from whole_stack import RunningStack, cmdline, running_stack

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

NOTEBOOK_CODE = Path(__file__).resolve().parent / "notebook_code"
MODEL = "jpeg_classifier"
CONCURRENCY = "64"  # the notebook's max_concurrent_transforms
# The notebook's job over JSON lines (one base64 image each): one prediction per line, in order.
JSON_LINES_JOB = {
    "content_type": "application/jsonlines",
    "accept": "application/jsonlines",
    "split_type": "Line",
    "batch_strategy": "MultiRecord",
    "assemble_with": "Line",
}


def b64_line(data: bytes) -> str:
    return json.dumps({"b64": base64.b64encode(data).decode()})


def make_model_dir(root: Path, test_models) -> Path:  # type: ignore[no-untyped-def]
    """The notebook's model.tar.gz layout: the model's versions and code/inference.py."""
    root.mkdir()
    (root / MODEL).symlink_to(test_models(MODEL), target_is_directory=True)
    shutil.copytree(NOTEBOOK_CODE, root / "code", ignore=shutil.ignore_patterns("__pycache__"))
    return root


@pytest.fixture(scope="module")
def model_dir(test_models, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_model_dir(tmp_path_factory.mktemp("shared") / "model", test_models)


@pytest.fixture(scope="module")
def stack(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    env = {
        "SAGEMAKER_BATCH": "true",
        "SAGEMAKER_MAX_CONCURRENT_TRANSFORMS": CONCURRENCY,
        "SAGEMAKER_MAX_PAYLOAD_IN_MB": "1",
    }
    with running_stack(model_dir, tmp_path_factory.mktemp("work"), env) as running:
        yield running


def transform(**options: object) -> int:
    """``sagemaker-tfs transform`` run in this process, with ``options`` as its flags
    (``job_flags``) and progress as log lines; its exit code."""
    return transform_main.main([*job_flags(**options), "--progress", "log"])


def direct(stack: RunningStack, body: bytes, content_type: str, accept: str) -> bytes:
    response = requests.post(
        stack.url + "/invocations",
        data=body,
        timeout=60,
        headers={"Content-Type": content_type, "Accept": accept},
    )
    assert response.status_code == 200, response.text
    return response.content


def assert_same_prediction(got: object, expected: object) -> None:
    assert isinstance(got, dict) and isinstance(expected, dict)
    assert got["classes"] == expected["classes"]
    np.testing.assert_allclose(
        got["probabilities"], expected["probabilities"], rtol=1e-5, atol=1e-7
    )


def assert_answers_are_the_direct_ones(
    stack: RunningStack, records: list[str], answers: list[str]
) -> None:
    """One JSON-lines answer per record, each the prediction the stack gives that record sent
    on its own."""
    assert len(answers) == len(records)
    for record, answer in zip(records, answers, strict=True):
        expected = direct(stack, record.encode(), "application/jsonlines", "application/jsonlines")
        assert_same_prediction(json.loads(answer), json.loads(expected))


def test_json_lines_of_base64_images_multi_record(stack: RunningStack, tmp_path: Path) -> None:
    """SplitType Line, MultiRecord, 64 concurrent, AssembleWith Line: one prediction per line,
    in input order, across several mini-batches per file."""
    files = {"batch-0.jsonl": 200, "more/batch-1.jsonl": 7}
    records: dict[str, list[str]] = {}
    for index, (name, count) in enumerate(files.items()):
        records[name] = [b64_line(random_jpeg(1000 * index + i, size=96)) for i in range(count)]
        (tmp_path / "in" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "in" / name).write_text("\n".join(records[name]) + "\n")
    assert (tmp_path / "in" / "batch-0.jsonl").stat().st_size > 2 << 20  # 3 mini-batches of 1 MB
    code = transform(
        endpoint=stack.url, input=tmp_path / "in", output=tmp_path / "out", **JSON_LINES_JOB
    )
    assert code == 0
    for name, lines in records.items():
        out = (tmp_path / "out" / f"{name}.out").read_text().splitlines()
        assert_answers_are_the_direct_ones(stack, lines, out)
    assert sorted(p.name for p in (tmp_path / "out").rglob("*")) == [
        "batch-0.jsonl.out",
        "batch-1.jsonl.out",
        "more",
    ]


def test_image_files_split_type_none(stack: RunningStack, tmp_path: Path) -> None:
    """The notebook's job: one JPEG per object, application/x-image, each answer saved
    unmodified as ``<name>.jpg.out``."""
    images = {f"{i:04d}.jpg": random_jpeg(i, size=32 + i) for i in range(40)}
    for name, data in images.items():
        (tmp_path / "jpg" / name).parent.mkdir(exist_ok=True)
        (tmp_path / "jpg" / name).write_bytes(data)
    code = transform(
        endpoint=stack.url,
        input=tmp_path / "jpg",
        output=tmp_path / "out",
        content_type="application/x-image",
    )
    assert code == 0
    for name, data in images.items():
        saved = json.loads((tmp_path / "out" / f"{name}.out").read_bytes())
        expected = json.loads(direct(stack, data, "application/x-image", "application/json"))
        assert_same_prediction(saved["predictions"][0], expected["predictions"][0])


def test_a_record_that_keeps_failing_fails_the_job(
    stack: RunningStack, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lines = [b64_line(random_jpeg(i)) for i in range(30)]
    lines[11] = b64_line(b"not a jpeg at all")
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_text("\n".join(lines[:5]) + "\n")
    (tmp_path / "in" / "b.jsonl").write_text("\n".join(lines) + "\n")
    code = transform(
        endpoint=stack.url,
        input=tmp_path / "in",
        output=tmp_path / "out",
        content_type="application/jsonlines",
        split_type="Line",
        batch_strategy="SingleRecord",
        invocations_max_retries=1,
    )
    assert code == 1
    failure = caplog.records[-1].getMessage()
    # the model server's 400 (the model's own error), passed on as the model server gave it
    # (output_handler sees successes only): a client error, so not retried
    assert failure.startswith(f"job failed: {tmp_path / 'in' / 'b.jsonl'}: record 12: HTTP 400")
    assert "attempts" not in failure and "JPEG" in failure
    assert sorted(os.listdir(tmp_path / "out")) == ["a.jsonl.out"]


def test_an_image_over_max_payload_fails_before_it_is_sent(
    stack: RunningStack, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "jpg").mkdir()
    big = random_jpeg(7, size=1200)
    assert len(big) > 1 << 20
    (tmp_path / "jpg" / "big.jpg").write_bytes(big)
    code = transform(
        endpoint=stack.url,
        input=tmp_path / "jpg",
        output=tmp_path / "out",
        content_type="application/x-image",
        max_payload_mb=1,
    )
    assert code == 1
    assert "big.jpg: record 1 is more than 1048576 bytes, over MaxPayloadInMB" in caplog.text
    assert not list(tmp_path.glob("out/*"))


def test_model_dir_mode_s3_manifest_gzip(stack: RunningStack, tmp_path: Path, test_models) -> None:
    """``--model-dir``: the command starts its own stack and stops it; input from an S3
    ManifestFile of gzipped JSON lines, output to S3 (moto's server)."""
    model_dir = make_model_dir(tmp_path / "own-model", test_models)
    images = [random_jpeg(500 + i) for i in range(12)]
    lines = [b64_line(data) for data in images]
    with s3_server(tmp_path) as s3:
        client = s3.client()
        client.create_bucket(Bucket="notebook-data")
        for key, part in (("in/part-0.jsonl.gz", lines[:8]), ("in/part-1.jsonl.gz", lines[8:])):
            body = gzip.compress(("\n".join(part) + "\n").encode())
            client.put_object(Bucket="notebook-data", Key=key, Body=body)
        client.put_object(Bucket="notebook-data", Key="in/skipped.jsonl.gz", Body=b"not gzip")
        manifest = [{"prefix": "s3://notebook-data/in/"}, "part-0.jsonl.gz", "part-1.jsonl.gz"]
        client.put_object(Bucket="notebook-data", Key="job.manifest", Body=json.dumps(manifest))
        flags = job_flags(
            model_dir=model_dir,
            manifest="s3://notebook-data/job.manifest",
            output="s3://notebook-data/out",
            compression="Gzip",
            max_concurrent_transforms=CONCURRENCY,
            **JSON_LINES_JOB,
        )
        result = subprocess.run(
            [sys.executable, "-m", "sagemaker_tfs.cli", "transform", *flags],
            env={**os.environ, **s3.env},
            capture_output=True,
            text=True,
            timeout=400,
        )
        assert result.returncode == 0, result.stderr[-4000:]
        assert "execution-parameters: {'MaxConcurrentTransforms': 64" in result.stderr
        assert "job done: 2/2 files, 12 records" in result.stderr
        assert sorted(s3.keys("notebook-data", "out/")) == [
            "out/part-0.jsonl.gz.out",
            "out/part-1.jsonl.gz.out",
        ]
        out = (
            (
                s3.read("notebook-data", "out/part-0.jsonl.gz.out")
                + s3.read("notebook-data", "out/part-1.jsonl.gz.out")
            )
            .decode()
            .splitlines()
        )
    assert_answers_are_the_direct_ones(stack, lines, out)
    leftovers = [
        pid
        for pid in map(int, filter(str.isdigit, os.listdir("/proc")))
        if str(model_dir) in cmdline(pid)
    ]
    assert leftovers == []  # the command stopped the stack it started


def test_a_stack_that_cannot_start_fails_the_job_with_its_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "empty-models").mkdir()
    (tmp_path / "in.jsonl").write_text("{}\n")
    code = transform(
        model_dir=tmp_path / "empty-models",
        input=tmp_path / "in.jsonl",
        output=tmp_path / "out",
        content_type="application/json",
    )
    assert code == 1
    failure = caplog.records[-1].getMessage()
    assert failure.startswith("job failed: the stack exited with "), failure
    assert "its log ends:" in failure and "empty-models" in failure
    assert not (tmp_path / "out").exists()


def test_filters_and_join_on_the_stack(tmp_path: Path, test_models) -> None:
    """SageMaker's documented pattern: send only the features, keep the id, join the answer
    (``--model-dir`` with ``half_plus_three``, no inference.py: njs converts JSON lines and
    answers one JSON document per request, so one record per request)."""
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "half_plus_three").symlink_to(test_models("half_plus_three"))
    rows = [{"id": f"row-{i}", "features": {"x": float(i)}} for i in range(25)]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    code = transform(
        model_dir=model_dir,
        input=tmp_path / "in.jsonl",
        output=tmp_path / "out",
        content_type="application/jsonlines",
        split_type="Line",
        batch_strategy="SingleRecord",
        assemble_with="Line",
        input_filter="$.features",
        join_source="Input",
        output_filter="$['id','SageMakerOutput']",
    )
    assert code == 0
    out = [
        json.loads(line) for line in (tmp_path / "out" / "in.jsonl.out").read_text().splitlines()
    ]
    expected = [
        {"id": f"row-{i}", "SageMakerOutput": {"predictions": [0.5 * i + 4.0]}} for i in range(25)
    ]
    assert out == expected  # version 124 of half_plus_three: y = 0.5 x + 4
