"""The whole stack sized for the CPUs it may use: ``serve`` started on one CPU of its affinity
mask (what ``taskset -c 0`` does; a CPU quota takes the same path, see
test/unit/test_container_limits.py and the container suite's test_container_cpus.py) logs that
count with the memory limit in its configuration line, and hands it to the model server, whose
TensorFlow pools, REST threads and batch threads follow."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import requests
from whole_stack import StartStack, cmdline

pytestmark = pytest.mark.slow
CONFIG_LINE = "configuration in effect: "


def logged_config(log: str) -> dict:
    (line,) = [line for line in log.splitlines() if CONFIG_LINE in line]
    return json.loads(line.split(CONFIG_LINE, 1)[1])


def test_serve_on_one_cpu_sizes_the_stack_for_one(
    start_stack: StartStack, resources_dir: Path
) -> None:
    env = {"SAGEMAKER_TFS_ENABLE_BATCHING": "true"}
    one_cpu = {min(os.sched_getaffinity(0))}
    stack = start_stack(resources_dir / "models", env=env, affinity=one_cpu)
    response = requests.post(f"{stack.url}/invocations", json={"instances": [1.0]}, timeout=30)
    assert response.status_code == 200, response.text

    config = logged_config(stack.log_text())
    assert config["cpus"] == 1
    assert config["container"].startswith("1 CPU from "), config["container"]
    assert "memory limit" in config["container"]
    assert (
        config["model_servers"]["intra_op_parallelism"],
        config["model_servers"]["inter_op_parallelism"],
    ) == (1, 1)
    assert (
        config["model_servers"]["batching"]["num_batch_threads"]
        == config["model_servers"]["batching"]["max_enqueued_batches"]
    )
    assert config["model_servers"]["batching"]["num_batch_threads"] == 1

    (model_server,) = stack.child_pids("--rest_api_port")
    command = cmdline(model_server)
    assert "--tensorflow_intra_op_parallelism=1" in command
    assert "--tensorflow_inter_op_parallelism=1" in command
    assert "--rest_api_num_threads=4" in command
    log = stack.log_text()
    assert "container: 1 CPU from " in log  # the model server's own flags line
    assert "TensorFlow sessions: 1 intra-op and 1 inter-op threads" in log
    assert ": 4 request threads" in log
