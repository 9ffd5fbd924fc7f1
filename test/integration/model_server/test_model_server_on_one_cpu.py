"""The Python model server sizes itself to the CPUs it may use, not to the machine's cores.

Started on one CPU of its affinity mask (as ``taskset -c 0`` would run it), it logs that count
in its flags line, and its defaults follow it: TensorFlow's intra- and inter-op pools (the
inter-op threads are visible by their name, ``tf_Compute``), the REST request threads (4 per
CPU) and the batch threads. A CPU quota takes the same path (``container_limits.cpu_count``,
tested against fake cgroup trees in test/unit/test_container_limits.py); the container suite
starts the image with ``--cpus 1`` (test/image/test_container_cpus.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import requests
from model_server_process import ServerHandle

pytestmark = pytest.mark.slow


def thread_names(pid: int) -> list[str]:
    names = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            names.append((task / "comm").read_text().strip())
        except OSError:
            continue  # the thread ended
    return names


def test_one_cpu_of_affinity_sizes_every_pool(
    start_model_server, test_models
) -> None:  # noqa: ANN001
    one_cpu = {min(os.sched_getaffinity(0))}
    server: ServerHandle = start_model_server(
        "--model_name=m",
        f"--model_base_path={test_models('half_plus_three')}",
        "--enable_batching",
        affinity=one_cpu,
    )
    response = requests.post(
        f"{server.rest_url}/v1/models/m:predict", json={"instances": [1.0, 2.0]}, timeout=30
    )
    assert response.status_code == 200, response.text
    log = server.log
    assert "container: 1 CPU from " in log, log
    assert "TensorFlow sessions: 1 intra-op and 1 inter-op threads" in log
    assert f"REST API on port {server.rest_port}: 4 request threads" in log
    assert "num_batch_threads: 1," in log
    assert thread_names(server.process.pid).count("tf_Compute") == 1


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to tell apart")
def test_two_cpus_of_affinity_give_two(start_model_server, test_models) -> None:  # noqa: ANN001
    """The counterpart: the same server on two CPUs sizes its pools for two."""
    two_cpus = set(sorted(os.sched_getaffinity(0))[:2])
    server: ServerHandle = start_model_server(
        "--model_name=m", f"--model_base_path={test_models('half_plus_three')}", affinity=two_cpus
    )
    response = requests.post(
        f"{server.rest_url}/v1/models/m:predict", json={"instances": [1.0]}, timeout=30
    )
    assert response.status_code == 200, response.text
    assert "TensorFlow sessions: 2 intra-op and 2 inter-op threads" in server.log
    assert f"REST API on port {server.rest_port}: 8 request threads" in server.log
    assert thread_names(server.process.pid).count("tf_Compute") == 2
