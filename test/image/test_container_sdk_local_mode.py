"""The SageMaker Python SDK v2's local mode on the image under test: a ``file://`` model.tar.gz
deployed with ``instance_type="local"``, called and deleted; and a local Batch Transform over
a folder of CSV files (``MultiRecord``, ``Line``). The SDK runs ``docker`` and
``docker-compose``: here podman (with the ``context inspect`` answer of
``stand_in/docker-for-sdk``) and podman-compose, both real. No AWS is reached: region, dummy
credentials and telemetry off (``test/sdk_offline.py``), ``logs=False``.

podman-compose leaves the containers running when the SDK ends it, so every container the SDK
starts carries a label unique to this run and is removed by it afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from engine import CONTAINERS_CONF, podman
from image_scripts import REPO_ROOT, Image, start_container, tail
from local_ports import free_port
from sdk_offline import offline_sdk_env, sdk_bin_dir

pytestmark = pytest.mark.slow
CLIENT = REPO_ROOT / "test" / "image" / "sdk_local_mode.py"
HALF_PLUS_THREE = REPO_ROOT / "test" / "resources" / "models" / "half_plus_three"
LABEL_KEY = "sagemaker-tfs-test-run"

# The transform job, kept as data so that another driver (sagemaker-tfs transform) can run the
# same job later and its output be compared record by record with the SDK's.
TRANSFORM_INPUT = {
    "first.csv": [1.0, 2.0, 5.0],
    "second.csv": [10.0, -4.0],
}
TRANSFORM_JOB = {
    "content_type": "text/csv",
    "split_type": "Line",
    "strategy": "MultiRecord",
    "assemble_with": "Line",
    "accept": "text/csv",
}


@pytest.fixture(scope="module")
def model_tar(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """model.tar.gz as users package it: the model directory at the top."""
    path = tmp_path_factory.mktemp("sdk_model") / "model.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        archive.add(HALF_PLUS_THREE, arcname="half_plus_three")
    return path


@pytest.fixture(scope="module")
def run_label() -> Iterator[str]:
    label = f"{LABEL_KEY}={uuid.uuid4().hex[:12]}"
    yield label
    remove_labelled_containers(label)


@pytest.fixture(scope="module")
def sdk_env(sdk_python: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    bin_dir = sdk_bin_dir(tmp_path_factory.mktemp("sdk_local_bin"))
    (bin_dir / "docker-compose").symlink_to(sdk_python.parent / "podman-compose")
    env = {
        "PATH": f"{bin_dir}:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": os.environ.get("HOME", "/root"),
        "CONTAINERS_CONF": str(CONTAINERS_CONF),
    }
    env.update(offline_sdk_env(tmp_path_factory.mktemp("sdk_local_config")))
    return env


def labelled_containers(label: str) -> list[str]:
    return podman("ps", "--all", "--quiet", "--filter", f"label={label}").split()


def remove_labelled_containers(label: str) -> None:
    for container in labelled_containers(label):
        podman("rm", "--force", "--time", "0", container, check=False)


def run_client(sdk_python: Path, env: dict[str, str], result_file: Path, *args: str) -> dict:
    result = subprocess.run(
        [str(sdk_python), str(CLIENT), str(result_file), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, tail(result.stdout + result.stderr, 60)
    return json.loads(result_file.read_text())


def output_records(output_dir: Path, name: str) -> list[str]:
    """The records of one output file: its non-empty lines (the SDK adds a newline after each
    response, which already ends with one)."""
    text = (output_dir / f"{name}.out").read_text()
    return [line for line in text.splitlines() if line.strip()]


def test_deploy_predict_delete(
    image_under_test: Image,
    model_tar: Path,
    run_label: str,
    sdk_python: Path,
    sdk_env,
    tmp_path: Path,
) -> None:
    answers = run_client(
        sdk_python, sdk_env, tmp_path / "result.json",
        "deploy", image_under_test.name, str(model_tar), str(free_port()), run_label,
    )  # fmt: skip
    assert answers == {
        "json": {"predictions": [3.5, 4.0, 5.5]},
        "regress": {"results": [3.5]},
        "csv": {"predictions": [3.5, 4.0]},
        "npy": [3.5, 4.0, 5.5],
    }
    remove_labelled_containers(run_label)
    assert labelled_containers(run_label) == []


@pytest.fixture(scope="module")
def transform_input(tmp_path_factory: pytest.TempPathFactory) -> Path:
    input_dir = tmp_path_factory.mktemp("transform_input")
    for name, values in TRANSFORM_INPUT.items():
        (input_dir / name).write_text("".join(f"{value}\n" for value in values))
    return input_dir


@pytest.fixture(scope="module")
def sdk_transform_output(
    image_under_test: Image,
    model_tar: Path,
    run_label: str,
    sdk_python: Path,
    sdk_env,
    transform_input: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Path:
    """The output folder of the SDK's local Batch Transform of TRANSFORM_JOB."""
    work = tmp_path_factory.mktemp("sdk_transform")
    output_dir = work / "output"
    run_client(
        sdk_python, sdk_env, work / "result.json",
        "transform", image_under_test.name, str(model_tar), str(free_port()), run_label,
        str(transform_input), str(output_dir), TRANSFORM_JOB["accept"],
    )  # fmt: skip
    remove_labelled_containers(run_label)
    return output_dir


def test_batch_transform_multi_record_line(sdk_transform_output: Path, run_label: str) -> None:
    output_dir = sdk_transform_output
    assert sorted(path.name for path in output_dir.iterdir()) == ["first.csv.out", "second.csv.out"]
    for name, values in TRANSFORM_INPUT.items():
        records = [float(record) for record in output_records(output_dir, name)]
        assert records == [value * 0.5 + 3 for value in values], name
    assert labelled_containers(run_label) == []


def test_transform_driver_matches_sdk_local_mode(
    image_under_test: Image,
    bin_dir: Path,
    model_tar: Path,
    transform_input: Path,
    sdk_transform_output: Path,
    tmp_path: Path,
) -> None:
    """``sagemaker-tfs transform`` runs the same job against a container of the same image
    (started by start.sh) and writes the same records as the SDK's local mode."""
    model_dir, output_dir = tmp_path / "model", tmp_path / "output"
    with tarfile.open(model_tar) as archive:
        archive.extractall(model_dir, filter="data")
    container = start_container(image_under_test, bin_dir, free_port(), model_dir)
    try:
        result = subprocess.run(
            [
                sys.executable, "-m", "sagemaker_tfs.cli", "transform",
                "--endpoint", container.url(""),
                "--input", str(transform_input), "--output", str(output_dir),
                "--content-type", TRANSFORM_JOB["content_type"],
                "--accept", TRANSFORM_JOB["accept"],
                "--split-type", TRANSFORM_JOB["split_type"],
                "--batch-strategy", TRANSFORM_JOB["strategy"],
                "--assemble-with", TRANSFORM_JOB["assemble_with"],
            ],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
    finally:
        container.stop()
    assert result.returncode == 0, tail(result.stdout + result.stderr, 40)
    for name in TRANSFORM_INPUT:
        assert output_records(output_dir, name) == output_records(sdk_transform_output, name)
