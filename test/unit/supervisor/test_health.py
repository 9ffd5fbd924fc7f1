"""HealthMonitor's judgement, round by round, and the verdict file it writes.

The model servers' answers are scripted (``ScriptedClient`` stands in for the gRPC
``ModelServiceClient``: what a status call answers is the input of the judgement under test);
test/integration/stack/test_ping_health.py and test/reliability/test_ping_under_load.py run the
real thing.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from sagemaker_tfs.ports import Instance
from sagemaker_tfs.supervisor.model_servers.health import (
    MISSES_BEFORE_DOWN,
    PROBE_NAME,
    HealthMonitor,
    Verdict,
    WatchedServer,
    status_target,
)
from sagemaker_tfs.supervisor.model_servers.model_service_client import StatusAnswer
from stack_configs import StackConfigBuilder

AVAILABLE = StatusAnswer(True, True)
LOADING = StatusAnswer(True, False)
NOT_FOUND = StatusAnswer(True, False, "NOT_FOUND: Could not find any versions of model x")
TIMED_OUT = StatusAnswer(False, detail="DEADLINE_EXCEEDED: Deadline Exceeded")


class ScriptedClient:
    """Answers each model's status as ``answers[name]`` says; records what was asked."""

    def __init__(self, answers: dict[str, StatusAnswer]) -> None:
        self.answers = answers
        self.asked: list[tuple[str, float]] = []
        self.closed = False

    def ask_state(self, name: str, timeout: float) -> Callable[[], StatusAnswer]:
        self.asked.append((name, timeout))
        return lambda: self.answers[name]

    def close(self) -> None:
        self.closed = True


class Fixture:
    def __init__(self, tmp_path: Path) -> None:
        self.path = tmp_path / "health.json"
        self.servers: list[WatchedServer] = []
        self.clients: dict[str, ScriptedClient] = {}
        self.answers: dict[str, dict[str, StatusAnswer]] = {}
        self.monitor = HealthMonitor(str(self.path), lambda: self.servers, self.client_for)

    def client_for(self, target: str) -> ScriptedClient:
        client = self.clients[target] = ScriptedClient(self.answers.setdefault(target, {}))
        return client

    def watch(self, *servers: WatchedServer) -> None:
        self.servers = list(servers)

    def answer(self, target: str, **answers: StatusAnswer) -> None:
        self.answers.setdefault(target, {}).update(answers)

    def written(self) -> dict:
        return json.loads(self.path.read_text())


@pytest.fixture
def health(tmp_path: Path) -> Fixture:
    return Fixture(tmp_path)


def server(key: str = "model-server[0]", models: tuple[str, ...] = ("a",), pid: int | None = 10,
           not_ready: str | None = None) -> WatchedServer:  # fmt: skip
    return WatchedServer(key, f"unix:/w/{key}.sock.status", models, pid, not_ready)


def test_healthy_when_every_model_server_answers_with_its_models_available(
    health: Fixture,
) -> None:
    health.watch(server(models=("a", "b")), server("model-server[1]", ("a", "b"), 11))
    health.answer("unix:/w/model-server[0].sock.status", a=AVAILABLE, b=AVAILABLE)
    health.answer("unix:/w/model-server[1].sock.status", a=AVAILABLE, b=AVAILABLE)
    before = time.time()
    assert health.monitor.check_once() == Verdict(True)
    written = health.written()
    assert written["healthy"] is True and written["error"] is None
    assert before <= written["written_at"] <= time.time()
    asked = health.clients["unix:/w/model-server[0].sock.status"].asked
    assert asked == [("a", 1.0), ("b", 1.0)]  # each model, with the short deadline


def test_a_model_not_available_is_named(health: Fixture) -> None:
    health.watch(server(models=("a", "b")))
    health.answer("unix:/w/model-server[0].sock.status", a=AVAILABLE, b=LOADING)
    verdict = health.monitor.check_once()
    assert verdict == Verdict(False, "Models not available yet on model-server[0]: b")
    written = health.written()
    assert (written["healthy"], written["error"]) == (False, verdict.error)


def test_a_model_server_that_does_not_run_is_down_at_once(health: Fixture) -> None:
    health.watch(server(pid=None))
    assert health.monitor.check_once() == Verdict(False, "model-server[0] is not running")
    assert health.clients == {}  # nothing asked of a process that is not there


def test_a_model_server_is_down_after_the_bound_of_missed_checks_and_back_at_one_answer(
    health: Fixture,
) -> None:
    target = "unix:/w/model-server[0].sock.status"
    health.watch(server())
    health.answer(target, a=AVAILABLE)
    assert health.monitor.check_once().healthy
    health.answer(target, a=TIMED_OUT)
    for _ in range(MISSES_BEFORE_DOWN - 1):
        assert health.monitor.check_once().healthy  # a miss or two: starved, not hung
    verdict = health.monitor.check_once()
    assert not verdict.healthy
    assert verdict.error == (
        "model-server[0] does not answer its health checks (DEADLINE_EXCEEDED: Deadline Exceeded)"
    )
    health.answer(target, a=AVAILABLE)
    assert health.monitor.check_once() == Verdict(True)


def test_a_new_process_is_starting_until_it_answered(health: Fixture) -> None:
    target = "unix:/w/model-server[0].sock.status"
    health.watch(server(pid=10))
    health.answer(target, a=AVAILABLE)
    assert health.monitor.check_once().healthy
    health.watch(server(pid=12))  # restarted between two rounds
    health.answer(target, a=TIMED_OUT)
    assert health.monitor.check_once() == Verdict(
        False, "model-server[0] is starting: models not available yet: a"
    )
    health.answer(target, a=LOADING)
    assert health.monitor.check_once() == Verdict(
        False, "Models not available yet on model-server[0]: a"
    )
    health.answer(target, a=AVAILABLE)
    assert health.monitor.check_once().healthy


def test_multi_model_shared_asks_for_no_model_and_takes_not_found_as_an_answer(
    health: Fixture,
) -> None:
    target = "unix:/w/model-server[0].sock.status"
    health.watch(server(models=()))
    health.answer(target, **{PROBE_NAME: NOT_FOUND})
    assert health.monitor.check_once().healthy
    assert health.clients[target].asked == [(PROBE_NAME, 1.0)]
    health.watch(server(models=(), not_ready="is being brought in line"))
    assert health.monitor.check_once() == Verdict(False, "model-server[0] is being brought in line")


def test_a_model_server_that_left_the_watch_during_the_round_does_not_count(
    health: Fixture,
) -> None:
    """Per model: a model unloaded while its server was asked (its process stopping)."""
    target = "unix:/w/model-server[m].sock.status"
    leaving = server("model-server[m]", ("m",), pid=None)
    rounds = iter([[leaving], []])
    health.monitor = HealthMonitor(str(health.path), lambda: next(rounds), health.client_for)
    assert health.monitor.check_once() == Verdict(True)
    assert target not in health.clients


def test_channels_of_model_servers_no_longer_watched_are_closed(health: Fixture) -> None:
    health.watch(server("model-server[m]", ("m",)))
    health.answer("unix:/w/model-server[m].sock.status", m=AVAILABLE)
    health.monitor.check_once()
    client = health.clients["unix:/w/model-server[m].sock.status"]
    health.watch()
    assert health.monitor.check_once() == Verdict(True)
    assert client.closed


def test_each_change_of_verdict_is_logged_once(
    health: Fixture, caplog: pytest.LogCaptureFixture
) -> None:
    target = "unix:/w/model-server[0].sock.status"
    health.watch(server())
    health.answer(target, a=AVAILABLE)
    with caplog.at_level(logging.INFO, logger="sagemaker_tfs.supervisor.model_servers.health"):
        for answer in (AVAILABLE, AVAILABLE, LOADING, LOADING, AVAILABLE):
            health.answer(target, a=answer)
            health.monitor.check_once()
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 3, lines
    assert "not healthy: Models not available yet on model-server[0]: a" in lines[1]


def test_stop_writes_a_last_verdict_that_the_endpoint_is_stopping(health: Fixture) -> None:
    health.watch(server())
    health.answer("unix:/w/model-server[0].sock.status", a=AVAILABLE)
    health.monitor.start()
    assert health.written()["healthy"] is True  # the first round ran before start returned
    health.monitor.stop("The endpoint is stopping")
    assert health.written()["healthy"] is False
    assert health.written()["error"] == "The endpoint is stopping"
    assert all(client.closed for client in health.clients.values())


def test_the_python_model_server_is_asked_on_its_status_socket(
    stack_config: StackConfigBuilder,
) -> None:
    config = stack_config()
    instance = Instance(9000, 8501)
    grpc_socket = config.work.grpc_socket_path(9000)
    assert status_target(config, instance, python_model_server=True) == f"unix:{grpc_socket}.status"
    # tensorflow_model_server has no status socket: its gRPC socket.
    assert status_target(config, instance, python_model_server=False) == f"unix:{grpc_socket}"


def test_a_round_is_due_each_interval_and_at_once_when_a_process_changed_or_not_healthy(
    health: Fixture,
) -> None:
    target = "unix:/w/model-server[0].sock.status"
    health.watch(server(pid=10))
    health.answer(target, a=AVAILABLE)
    assert health.monitor.round_due(health.servers, time.monotonic())  # no verdict yet
    health.monitor.check_once()
    now = time.monotonic()
    assert not health.monitor.round_due([server(pid=10)], now)  # healthy, same process
    assert health.monitor.round_due([server(pid=10)], now + 1.0)  # the interval passed
    assert health.monitor.round_due([server(pid=None)], now)  # it exited: seen at the tick
    assert health.monitor.round_due([server(pid=11)], now)  # restarted
    assert health.monitor.round_due([server(pid=10), server("model-server[m]", ("m",))], now)
    health.answer(target, a=LOADING)
    health.monitor.check_once()
    assert health.monitor.round_due([server(pid=10)], time.monotonic())  # not healthy: each tick


def test_one_model_server_of_two_down_leaves_the_instance_serving_and_names_it(
    health: Fixture,
) -> None:
    """``/ping`` says whether the instance can serve: 200 while any model server serves."""
    first, second = "unix:/w/model-server[0].sock.status", "unix:/w/model-server[1].sock.status"
    health.answer(first, a=AVAILABLE)
    health.answer(second, a=AVAILABLE)
    health.watch(server(), server("model-server[1]", pid=None))
    assert health.monitor.check_once() == Verdict(True, degraded="model-server[1] is not running")
    written = health.written()
    assert (written["healthy"], written["degraded"]) == (True, "model-server[1] is not running")
    # Degraded: a round each tick, so that the one restarting is seen back at once.
    assert health.monitor.round_due(health.servers, time.monotonic())
    health.watch(server(pid=None), server("model-server[1]", pid=11))
    health.answer(second, a=LOADING)
    verdict = health.monitor.check_once()  # neither serves now
    assert verdict == Verdict(
        False,
        "model-server[0] is not running; Models not available yet on model-server[1]: a",
    )
    health.answer(second, a=AVAILABLE)
    assert health.monitor.check_once() == Verdict(True, degraded="model-server[0] is not running")


def test_every_kind_of_down_counts_against_the_instance_only_when_none_serves(
    health: Fixture,
) -> None:
    """Multi-model shared: one in line and answering is enough; one hung (missed checks) and
    one being brought in line are not serving."""
    hung, fresh = "unix:/w/model-server[0].sock.status", "unix:/w/model-server[1].sock.status"
    health.answer(hung, **{PROBE_NAME: NOT_FOUND})
    health.answer(fresh, **{PROBE_NAME: NOT_FOUND})
    health.watch(server(models=()), server("model-server[1]", (), 11))
    assert health.monitor.check_once() == Verdict(True)
    health.answer(hung, **{PROBE_NAME: TIMED_OUT})
    for _ in range(MISSES_BEFORE_DOWN):
        assert health.monitor.check_once().healthy
    health.watch(server(models=()), server("model-server[1]", (), 11, "is being brought in line"))
    verdict = health.monitor.check_once()
    assert not verdict.healthy
    assert verdict.error is not None and "does not answer" in verdict.error
    assert "model-server[1] is being brought in line" in verdict.error


def test_a_multi_model_stack_with_no_model_loaded_serves(health: Fixture) -> None:
    health.watch()
    assert health.monitor.check_once() == Verdict(True)


def test_a_degraded_instance_is_logged_once_as_a_warning(
    health: Fixture, caplog: pytest.LogCaptureFixture
) -> None:
    health.answer("unix:/w/model-server[0].sock.status", a=AVAILABLE)
    with caplog.at_level(logging.INFO, logger="sagemaker_tfs.supervisor.model_servers.health"):
        for pid in (None, None, 11):
            health.watch(server(), server("model-server[1]", pid=pid))
            health.answer("unix:/w/model-server[1].sock.status", a=AVAILABLE)
            health.monitor.check_once()
    lines = [(record.levelname, record.getMessage()) for record in caplog.records]
    assert lines[0] == (
        "WARNING",
        "health: serving, with model servers down: model-server[1] is not running",
    )
    assert lines[1:] == [("INFO", "health: every model server answers and serves its models")]
