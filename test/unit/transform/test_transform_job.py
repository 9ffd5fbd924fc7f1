"""The command line parsed into a TransformJob, and values from /execution-parameters."""

from __future__ import annotations

import pytest
from sagemaker_tfs.transform.job import JobConfigError, TransformJob, parse_args, resolve

BASE = [
    "--endpoint",
    "http://127.0.0.1:8080",
    "--input",
    "in",
    "--output",
    "out",
    "--content-type",
    "application/json",
]


def test_defaults_and_case_insensitive_choices() -> None:
    job = parse_args(
        [
            *BASE,
            "--split-type",
            "line",
            "--batch-strategy",
            "multirecord",
            "--env",
            "A=1",
            "--env",
            "B=x=y",
        ]
    )
    assert job.split_type == "Line" and job.batch_strategy == "MultiRecord"
    assert job.env == {"A": "1", "B": "x=y"}
    assert job.max_payload_mb is None and job.max_concurrent_transforms is None
    assert (job.invocations_timeout, job.invocations_max_retries) == (600, 3)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--split-type", "Lines"], "--split-type must be one of None, Line, RecordIO, TFRecord"),
        (["--max-payload-mb", "101"], "--max-payload-mb must be between 0 and 100, got 101"),
        (["--max-concurrent-transforms", "0"], "between 1 and 1000"),
        (["--invocations-max-retries", "4"], "between 0 and 3"),
        (["--env", "1A=b"], "--env takes NAME=VALUE"),
        (["--split-type", "RecordIO", "--join-source", "Input"], "use --split-type Line or None"),
        (["--split-type", "Line", "--join-source", "Input"], "needs --assemble-with Line"),
        (["--image", "x"], "--image is only used with --on-sagemaker"),
        (["--on-sagemaker", "arn:aws:iam::1:role/r"], "--on-sagemaker needs --image"),
    ],
)
def test_bad_command_lines_name_the_option(extra: list[str], message: str) -> None:
    with pytest.raises(JobConfigError, match=message):
        parse_args([*BASE, *extra])


def test_model_dir_and_endpoint_exclude_each_other() -> None:
    with pytest.raises(JobConfigError, match="not allowed with argument"):
        parse_args([*BASE, "--model-dir", "models"])


def test_the_jobs_values_win_over_the_containers() -> None:
    job = TransformJob("in", "out", "text/csv", endpoint="http://h", max_payload_mb=1)
    params = {"MaxConcurrentTransforms": 4, "BatchStrategy": "SINGLE_RECORD", "MaxPayloadInMB": 9}
    resolved = resolve(job, params)
    assert (
        resolved.max_concurrent_transforms,
        resolved.batch_strategy,
        resolved.max_payload_mb,
    ) == (4, "SingleRecord", 1)
    assert resolved.accept == "application/json"


def test_nonsense_from_the_container_falls_back_to_defaults() -> None:
    job = TransformJob("in", "out", "text/csv", endpoint="http://h")
    params = {"MaxConcurrentTransforms": 0, "BatchStrategy": "BOTH", "MaxPayloadInMB": "6"}
    for answer in (params, None):
        resolved = resolve(job, answer)
        assert (
            resolved.max_concurrent_transforms,
            resolved.batch_strategy,
            resolved.max_payload_mb,
        ) == (1, "MultiRecord", 6)


def test_zero_payload_means_the_100_mb_limit() -> None:
    job = resolve(TransformJob("in", "out", "t", endpoint="h", max_payload_mb=0), {})
    assert job.max_payload_bytes == 100 * 1024 * 1024


def test_the_container_environment_is_what_sagemaker_sets() -> None:
    job = parse_args(
        [
            *BASE,
            "--batch-strategy",
            "SingleRecord",
            "--max-payload-mb",
            "2",
            "--max-concurrent-transforms",
            "64",
            "--env",
            "SAGEMAKER_TFS_X=1",
        ]
    )
    assert job.container_environment() == {
        "SAGEMAKER_BATCH": "true",
        "SAGEMAKER_MAX_CONCURRENT_TRANSFORMS": "64",
        "SAGEMAKER_BATCH_STRATEGY": "SINGLE_RECORD",
        "SAGEMAKER_MAX_PAYLOAD_IN_MB": "2",
        "SAGEMAKER_TFS_X": "1",
    }


def test_a_missing_local_input_is_refused_before_any_stack_starts(
    tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    from sagemaker_tfs.transform import main as transform_main

    argv = [
        "--model-dir",
        str(tmp_path),
        "--input",
        str(tmp_path / "nope"),
        "--output",
        str(tmp_path / "out"),
        "--content-type",
        "text/csv",
    ]
    assert transform_main.main(argv) == 2
    assert f"--input '{tmp_path / 'nope'}' does not exist" in capsys.readouterr().err
