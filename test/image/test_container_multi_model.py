"""A multi-model container of the image under test (conftest.py says what is substituted):
``SAGEMAKER_MULTI_MODEL=true``, so start.sh mounts the models read-only at /opt/ml/models; load,
list, invoke and unload as SageMaker does, through HTTP and through ``curl.sh multi-model``.
The models share two model server processes (the multi-model default), reloaded over gRPC as
the ``tensorflow_model_server`` in the image is."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from image_scripts import Container, Image, run_script, start_container, tail
from local_ports import free_port

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def container(image_under_test: Image, bin_dir: Path, models_dir: Path) -> Iterator[Container]:
    env = {"SAGEMAKER_MULTI_MODEL": "true"}
    started = start_container(image_under_test, bin_dir, free_port(), models_dir, env)
    yield started
    assert started.stop().returncode == 0


def load(container: Container, name: str, url: str) -> requests.Response:
    body = {"model_name": name, "url": url}
    return requests.post(container.url("/models"), json=body, timeout=180)


def invoke(container: Container, name: str, body: str) -> requests.Response:
    return requests.post(
        container.url(f"/models/{name}/invoke"),
        data=body,
        headers={"Content-Type": "application/json"},
        timeout=60,
    )


def test_ping_answers_with_no_model_loaded(container: Container) -> None:
    assert requests.get(container.url("/ping"), timeout=5).status_code == 200
    assert requests.get(container.url("/models"), timeout=5).json() == {
        "models": [],
        "nextPageToken": None,
    }


def test_load_list_invoke_unload(container: Container) -> None:
    response = load(container, "hp3", "/opt/ml/models/half_plus_three")
    assert response.status_code == 200, response.text
    assert load(container, "hp2", "/opt/ml/models/half_plus_two").status_code == 200
    listed = requests.get(container.url("/models"), timeout=5).json()
    assert {m["modelName"] for m in listed["models"]} == {"hp2", "hp3"}

    assert invoke(container, "hp3", "[1.0, 2.0]").json() == {"predictions": [[3.5, 4.0]]}
    assert invoke(container, "hp2", '{"instances": [2.0]}').json() == {"predictions": [3.0]}
    assert load(container, "hp3", "/opt/ml/models/half_plus_three").status_code == 409

    assert requests.delete(container.url("/models/hp3"), timeout=60).status_code == 200
    gone = invoke(container, "hp3", "[1.0]")
    assert gone.status_code == 404
    assert gone.json() == {"error": "Model hp3 is not loaded yet."}
    assert invoke(container, "hp2", "[2.0]").json() == {"predictions": [[3.0]]}
    assert requests.delete(container.url("/models/hp2"), timeout=60).status_code == 200


@pytest.mark.parametrize(
    ("url", "status"),
    [("/opt/ml/models/does_not_exist", 404), ("/etc", 403), ("../../../../etc", 403)],
)
def test_bad_model_urls_are_refused(container: Container, url: str, status: int) -> None:
    response = load(container, "bad", url)
    assert response.status_code == status, response.text
    assert response.json()["error"]


def test_models_are_mounted_read_only(container: Container) -> None:
    out = container.exec("sh", "-c", "touch /opt/ml/models/x 2>&1; echo $?", check=False)
    assert "Read-only file system" in out


def test_curl_script_multi_model_examples(container: Container) -> None:
    result = run_script(
        "curl.sh", "--port", str(container.port), "multi-model", env=container.env, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("-- HTTP 200") == 4


def model_server_pids(container: Container) -> list[str]:
    """The processes in the container running a model server (``[=]``: not grep itself)."""
    out = container.exec("sh", "-c", "grep -l -a 'rest_api_port[=]' /proc/[0-9]*/cmdline")
    return sorted(line.split("/")[2] for line in out.split())


def test_models_share_two_model_servers_and_answer_while_one_is_killed(
    container: Container,
) -> None:
    names = [f"shared{index}" for index in range(6)]
    for name in names:
        response = load(container, name, "/opt/ml/models/half_plus_three")
        assert response.status_code == 200, response.text
    assert load(container, "shared_hp2", "/opt/ml/models/half_plus_two").status_code == 200
    servers = model_server_pids(container)
    assert len(servers) == 2, servers  # the default; no process or ports per model
    for name in names:
        assert invoke(container, name, "[1.0]").json() == {"predictions": [[3.5]]}
    assert invoke(container, "shared_hp2", "[2.0]").json() == {"predictions": [[3.0]]}

    killed = servers[0]
    container.exec("sh", "-c", f"kill -9 {killed}")
    failed, rounds = [], 0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        rounds += 1
        failed += [name for name in names if not answers(container, name)]
        pids = model_server_pids(container)
        if killed not in pids and len(pids) == 2 and all(answers(container, n) for n in names):
            break
        time.sleep(0.2)
    # The other model server answers for every model while the killed one restarts.
    assert failed == [], (failed, rounds, tail(container.logs()))
    assert killed not in model_server_pids(container), tail(container.logs())
    listed = {
        m["modelName"] for m in requests.get(container.url("/models"), timeout=5).json()["models"]
    }
    assert listed == {*names, "shared_hp2"}
    for name in [*names, "shared_hp2"]:
        assert requests.delete(container.url(f"/models/{name}"), timeout=60).status_code == 200


def answers(container: Container, name: str) -> bool:
    try:
        response = invoke(container, name, "[1.0]")
    except requests.RequestException:
        return False
    return response.status_code == 200 and response.json() == {"predictions": [[3.5]]}
