"""The docs' command blocks that run on this machine, run as written, with the test's own ports
and directories in place of 8080, 8500, 8501 and /tmp paths, and the test's Python
environment for ``.venv/bin/`` (``test/docs/test_doc_command_names.py`` checks every command names
what exists; this runs those that need no AWS account or container engine):

- README: the first command (``./scripts/start.sh --local``) and the "Try the first" block
  (curl, ``curl.sh``, ``stop.sh --local``), with docs/metrics.md's scrape before the stop;
  the example block (a model directory with the
  ``json`` example, served, called, stopped); ``sagemaker-tfs serve`` with a relative
  ``--model-dir``.
- docs/transform.md: the first job, on the bundled model.
- docs/model_server.md: the model server alone, its predict and its metrics.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import requests
from doc_commands import REPO_ROOT, Block, doc_blocks
from local_ports import free_port_range
from test_inference_examples import BUNDLED_MODEL, model_answers
from whole_stack import wait_for

pytestmark = pytest.mark.slow

VENV_BIN = str(Path(sys.executable).parent) + "/"
X = [1.0, 2.0, 5.0]  # what the docs' requests send


def block_with(doc: str, text: str) -> Block:
    """The one shell block of ``doc`` that contains ``text``."""
    found = [b for b in doc_blocks(REPO_ROOT / doc) if b.language == "bash" and text in b.text]
    assert len(found) == 1, f"{doc}: {len(found)} bash blocks contain {text!r}"
    return found[0]


def expected_y() -> list[float]:
    return model_answers(BUNDLED_MODEL / "00000123", x=np.array(X, np.float32))["y"].tolist()


class Shell:
    """Runs doc text with the test's ports, directories and Python environment."""

    def __init__(self, tmp_path: Path) -> None:
        low, high = free_port_range(24)
        self.ports = {"8080": str(low), "8500": str(low + 1), "8501": str(low + 2)}
        self.tmp = tmp_path
        self.env = {
            **os.environ,
            "SAGEMAKER_BIND_TO_PORT": self.ports["8080"],  # scripts/local.sh's port
            "SAGEMAKER_TFS_WORK_DIR": str(tmp_path / "local-work"),  # and its work dir
            "SAGEMAKER_SAFE_PORT_RANGE": f"{low + 4}-{high}",  # internal ports of the stacks
        }

    def adapt(self, text: str) -> str:
        text = re.sub(r"\b(8080|8500|8501)\b", lambda m: self.ports[m.group(1)], text)
        text = re.sub(r"/tmp/([\w.-]+)", lambda m: f"{self.tmp}/{m.group(1)}", text)
        text = text.replace(".venv/bin/", VENV_BIN)
        return text.replace("./scripts/curl.sh", f"./scripts/curl.sh --port {self.ports['8080']}")

    def run(self, text: str, timeout: float = 300) -> str:
        result = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", self.adapt(text)], cwd=REPO_ROOT, env=self.env,
            capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
        assert result.returncode == 0, f"{text}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
        return result.stdout

    @contextmanager
    def background(self, text: str) -> Iterator[subprocess.Popen[str]]:
        """A long-running command (a server) for the duration of the ``with`` block."""
        log = open(self.tmp / "background.log", "w")  # noqa: SIM115 - closed below
        process = subprocess.Popen(
            ["bash", "-c", "exec " + self.adapt(text)], cwd=REPO_ROOT, env=self.env,
            stdout=log, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        )  # fmt: skip
        try:
            yield process
        finally:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            log.close()

    def log(self) -> str:
        return (self.tmp / "background.log").read_text()

    def answers(self, url: str) -> bool:
        try:
            return requests.get(self.adapt(url), timeout=2).status_code == 200
        except requests.RequestException:
            return False


@pytest.fixture
def shell(tmp_path: Path) -> Iterator[Shell]:
    shell = Shell(tmp_path)
    yield shell
    subprocess.run([REPO_ROOT / "scripts/local.sh", "stop"], env=shell.env, check=False,
                   capture_output=True, timeout=120)  # fmt: skip


def test_readme_first_steps(shell: Shell) -> None:
    first = block_with("README.md", "./scripts/test.sh")
    start = [line for line in first.text.splitlines() if line.startswith("./scripts/start.sh")]
    assert start == [
        "./scripts/start.sh --local     # serve the bundled example model on http://localhost:8080"
    ]
    assert "serving" in shell.run(start[0])
    try_it = block_with("README.md", "./scripts/curl.sh").text
    requests_part, stop = try_it.split("./scripts/stop.sh --local")
    output = shell.run(requests_part)
    answer = json.loads(output[: output.index("== GET /ping")].strip())  # the curl line's answer
    assert answer == {"predictions": expected_y()}
    assert "-- HTTP 200" in output
    # docs/metrics.md's scrape, once the requests above were counted (nginx hands its lines to
    # the supervisor through a pipe: a moment later)
    scrape = block_with("docs/metrics.md", "/metrics").text
    njs_ok = re.compile(r'sagemaker_tfs_requests_total\{model="half_plus_three",route="njs",'
                        r'status_class="2xx"\} (\d+)')  # fmt: skip

    def counted() -> bool:  # the curl line and curl.sh's JSON examples at least
        try:
            found = njs_ok.search(shell.run(scrape))
        except AssertionError:  # grep found no line yet
            return False
        return found is not None and int(found.group(1)) >= 2

    assert wait_for(counted, 10), shell.run("curl -s localhost:8080/metrics")
    assert "stopped" in shell.run("./scripts/stop.sh --local" + stop)


def test_readme_example_block(shell: Shell) -> None:
    output = shell.run(block_with("README.md", "examples/inference/json/code").text)
    answer, _ = json.JSONDecoder().raw_decode(output[output.index("{") :])  # then stop.sh's
    assert answer == {"model": "half_plus_three", "y": expected_y()}
    assert "stopped" in output.splitlines()[-1]


def test_readme_serve_with_a_relative_model_dir(shell: Shell) -> None:
    command = block_with("README.md", "sagemaker-tfs serve").text.strip()
    assert "--model-dir test/resources/models" in command
    with shell.background(command) as serve:
        port = shell.ports["8080"]
        up = wait_for(
            lambda: shell.answers("http://localhost:8080/ping") or serve.poll() is not None, 180
        )
        assert up and serve.poll() is None, shell.log()[-3000:]
        answer = requests.post(
            f"http://127.0.0.1:{port}/invocations", json={"instances": X}, timeout=30
        )
        assert answer.json() == {"predictions": expected_y()}


def test_transform_first_job(shell: Shell) -> None:
    output = shell.run(block_with("docs/transform.md", "/tmp/transform-out/x.csv.out").text)
    assert json.loads(output.strip()) == {"predictions": expected_y()}


def test_model_server_alone_with_its_predict_and_metrics(shell: Shell) -> None:
    alone = block_with("docs/model_server.md", "v1/models/half_plus_three:predict").text
    predict = "curl " + alone.split("\ncurl ")[1]
    block = block_with("docs/model_server.md", "--monitoring_config_file=").text
    write_config, rest = block.split("\n", 1)
    server, metrics = rest.split("\ncurl ")
    shell.run(write_config)
    with shell.background(re.sub(r"\\\n\s*", "", server)) as process:
        status_url = "http://localhost:8501/v1/models/half_plus_three"
        up = wait_for(lambda: shell.answers(status_url) or process.poll() is not None, 180)
        assert up and process.poll() is None, shell.log()[-3000:]
        assert json.loads(shell.run(predict)) == {"predictions": expected_y()}
        counts = shell.run("curl " + metrics)
    counted = r':tensorflow:serving:request_count\{model_name="half_plus_three",status="OK"\} \d'
    assert re.search(counted, counts), counts
