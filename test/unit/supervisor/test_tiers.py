"""Each tier watches and stops itself (``startup.TierLauncher``): the Supervisor only orders
the tiers and gives each its deadline; nginx's port, the service's sockets, the stream server,
the standby and the model servers are stopped by their own tier. Real processes and sockets."""

from __future__ import annotations

import errno
import signal
import socket
import sys
import threading
import time
from pathlib import Path

import pytest
from process_checks import alive, wait_until
from sagemaker_tfs.supervisor import nginx_launcher, service_launcher
from sagemaker_tfs.supervisor.model_servers import model_server_launcher
from sagemaker_tfs.supervisor.model_servers.model_server_launcher import ModelServerLauncher
from sagemaker_tfs.supervisor.multi_model.registry import BackEndServer
from sagemaker_tfs.supervisor.nginx_launcher import NginxLauncher
from sagemaker_tfs.supervisor.processes.children import Child
from sagemaker_tfs.supervisor.service_launcher import STREAM_SERVER, ServiceLauncher
from sagemaker_tfs.supervisor.stack_supervisor import STOP_DEADLINES, Supervisor
from sagemaker_tfs.wire.errors import HttpError
from stack_configs import StackConfigBuilder

# A process that ignores SIGTERM: only the kill at its tier's deadline ends it.
STUBBORN = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
SLEEPS = "import time; time.sleep(60)"


class RecordingTier:
    """A tier that records what the Supervisor asked of it, in one log shared by all."""

    def __init__(self, name: str, log: list[tuple[str, str, float]]) -> None:
        self.name = name
        self.log = log

    def members(self) -> list[Child]:
        return []

    def check(self, now: float) -> None:
        self.log.append(("check", self.name, now))

    def begin_stop(self) -> None:
        self.log.append(("begin_stop", self.name, 0.0))

    def stop(self, deadline: float) -> None:
        self.log.append(("stop", self.name, deadline))


def recording_supervisor(
    stack_config: StackConfigBuilder, log: list[tuple[str, str, float]]
) -> Supervisor:
    supervisor = Supervisor(stack_config())
    supervisor.tiers = tuple(
        RecordingTier(tier.name, log) for tier in supervisor.tiers
    )  # start order, as built
    return supervisor


def test_the_supervisor_stops_every_tier_nginx_first_each_by_its_deadline(
    stack_config: StackConfigBuilder,
) -> None:
    log: list[tuple[str, str, float]] = []
    supervisor = recording_supervisor(stack_config, log)
    before = time.monotonic()
    supervisor.shutdown()
    after = time.monotonic()
    order = [nginx_launcher.TIER, service_launcher.TIER, model_server_launcher.TIER]
    assert [(event, name) for event, name, _ in log] == [
        *(("begin_stop", name) for name in order),
        *(("stop", name) for name in order),
    ]
    deadlines = {name: deadline for event, name, deadline in log if event == "stop"}
    assert STOP_DEADLINES == {
        nginx_launcher.TIER: 22.0,
        service_launcher.TIER: 24.0,
        model_server_launcher.TIER: 26.0,
    }
    for name, seconds in STOP_DEADLINES.items():  # from the one moment the stop began
        assert before + seconds <= deadlines[name] <= after + seconds


def test_the_watch_loop_asks_every_tier_to_check_itself(stack_config: StackConfigBuilder) -> None:
    log: list[tuple[str, str, float]] = []
    supervisor = recording_supervisor(stack_config, log)
    supervisor._watch_once()
    assert [name for _, name, _ in log] == [
        nginx_launcher.TIER,
        service_launcher.TIER,
        model_server_launcher.TIER,
    ]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def connects(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError as error:
        assert error.errno == errno.ECONNREFUSED
        return False
    return True


def test_nginx_closes_the_public_port_it_holds_before_any_tier_waits(
    stack_config: StackConfigBuilder,
) -> None:
    port = free_port()
    nginx = NginxLauncher(stack_config(port=port), {}, threading.Event())
    nginx.public_port.ensure()
    assert connects(port)  # held: a connection waits in the backlog
    nginx.begin_stop()
    assert nginx.public_port.fd is None
    assert not connects(port)  # refused at once, not queued for nobody


def held_unix_socket(path: str) -> socket.socket:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    return sock


def test_the_service_tier_tells_its_stream_server_first_and_removes_its_sockets(
    stack_config: StackConfigBuilder,
) -> None:
    config = stack_config()
    service = ServiceLauncher(config, {}, threading.Event())
    Path(config.work.root).mkdir(parents=True, exist_ok=True)
    service.service_socket.ensure()
    stream_socket = held_unix_socket(config.work.stream_socket)  # the stream server's, left behind
    stream = Child(STREAM_SERVER, [sys.executable, "-c", SLEEPS], {}, stop_timeout=10)
    service.children.start(service_launcher.TIER, stream)
    try:
        assert stream.pid is not None and alive(stream.pid)
        service.begin_stop()  # returns at once: the stream server gets SIGTERM now
        assert wait_until(lambda: not stream.running())
        assert stream.exit_code() == -signal.SIGTERM
        service.stop(time.monotonic() + 5)
    finally:
        stream_socket.close()
        stream.stop()
    assert service.service_socket.fd is None
    assert not Path(config.work.service_socket).exists()
    assert not Path(config.work.stream_socket).exists()
    assert service.members() == []


class RecordingStandby:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def check(self, now: float) -> None:
        self.calls.append("check")

    def stop(self) -> None:
        self.calls.append("stop")


def model_server_tier(stack_config: StackConfigBuilder) -> ModelServerLauncher:
    config = stack_config({"SAGEMAKER_TFS_STANDBY_MODEL_SERVER": "false"})
    return ModelServerLauncher(config, {}, threading.Event(), lambda: True)


def test_the_model_server_tier_watches_and_stops_its_standby(
    stack_config: StackConfigBuilder,
) -> None:
    tier = model_server_tier(stack_config)
    standby = RecordingStandby()
    tier.standby = standby  # type: ignore[assignment]
    tier.check(time.monotonic())
    tier.begin_stop()
    assert standby.calls == ["check", "stop"]


def test_the_model_server_tier_kills_what_is_left_at_its_deadline(
    stack_config: StackConfigBuilder,
) -> None:
    tier = model_server_tier(stack_config)
    child = Child("model-server[0]", [sys.executable, "-c", STUBBORN], {}, stop_timeout=10)
    tier.children.start(model_server_launcher.TIER, child)
    pid = child.pid
    assert pid is not None
    time.sleep(0.3)  # its SIGTERM handler is set
    started = time.monotonic()
    tier.stop(started + 0.5)
    took = time.monotonic() - started
    assert not alive(pid)
    assert 0.4 <= took < 3.0  # its deadline, not its own stop timeout of 10 s
    assert tier.members() == []
    with pytest.raises(HttpError) as refused:  # no model server starts after that
        tier.start_model_server("model-server[1]", tier.config.instances[0], str, lambda: True)
    assert refused.value.status == 503


class NamedBackEnd:
    """A multi-model back end that names its model servers itself."""

    def __init__(self, servers: list[BackEndServer]) -> None:
        self.servers = servers

    def watched(self) -> list[BackEndServer]:
        return self.servers


def test_the_health_monitor_watches_what_the_back_end_names(
    stack_config: StackConfigBuilder,
) -> None:
    tier = model_server_tier(stack_config)
    instance = tier.config.instances[0]
    child = Child("model-server[0]", [sys.executable, "-c", SLEEPS], {})
    tier.children.start(model_server_launcher.TIER, child)
    try:
        in_line = BackEndServer("model-server[0]", instance, ready_once_in_line=True)
        own_model = BackEndServer("model-server[m]", instance, ("m",))
        watched = tier.watched(NamedBackEnd([in_line, own_model]))  # type: ignore[arg-type]
    finally:
        tier.stop(time.monotonic() + 5)
    assert [(w.key, w.models, w.pid, w.not_ready) for w in watched] == [
        ("model-server[0]", (), child.pid, "is being brought in line"),  # not ready yet
        ("model-server[m]", ("m",), None, None),  # not running
    ]
