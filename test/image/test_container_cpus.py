"""A container of the image under test (conftest.py says what is substituted) given a CPU
quota of one CPU (``start.sh --cpus 1``, as a SageMaker inference component with one core has)
sizes the stack for 1 CPU, whatever the machine's cores: the supervisor's configuration line
says so with where the count came from, and the model server gets and logs pools for one CPU.
The count comes from the container's own cgroup files, whichever layout the engine gives
(the hybrid v1/v2 one with podman on these machines)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from image_scripts import Container, Image, start_container
from local_ports import free_port

pytestmark = pytest.mark.slow
CONFIG_LINE = "configuration in effect: "


@pytest.fixture(scope="module")
def container(image_under_test: Image, bin_dir: Path, models_dir: Path) -> Iterator[Container]:
    env = {"SAGEMAKER_TFS_DEFAULT_MODEL_NAME": "half_plus_three"}
    started = start_container(image_under_test, bin_dir, free_port(), models_dir, env, cpus="1")
    yield started
    assert started.stop().returncode == 0


def test_the_stack_starts_sized_for_one_cpu(container: Container) -> None:
    logs = container.logs()
    (line,) = [line for line in logs.splitlines() if CONFIG_LINE in line]
    config = json.loads(line.split(CONFIG_LINE, 1)[1])
    assert config["cpus"] == 1, config["container"]
    assert (
        config["model_servers"]["intra_op_parallelism"],
        config["model_servers"]["inter_op_parallelism"],
    ) == (1, 1)
    if len(os.sched_getaffinity(0)) > 1:  # more cores than the quota: the quota decides
        assert config["container"].startswith("1 CPU from the CPU quota"), config["container"]
    assert "container: 1 CPU from " in logs  # the model server's flags line
    assert "TensorFlow sessions: 1 intra-op and 1 inter-op threads" in logs
    assert ": 4 request threads" in logs
    command_lines = "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '"
    model_servers = container.exec("sh", "-c", command_lines)
    assert "--tensorflow_intra_op_parallelism=1" in model_servers
    assert "--rest_api_num_threads=4" in model_servers


def test_it_serves(container: Container) -> None:
    response = container.invoke('{"instances": [1.0, 2.0]}', "application/json")
    assert response.status_code == 200, response.text
    assert response.json() == {"predictions": [3.5, 4.0]}
