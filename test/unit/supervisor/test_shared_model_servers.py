"""The shared model servers' bookkeeping: what each reload sends, what the file lists, how a
restarted model server is brought back in line. A stand-in ModelService records the reloads
(the stack tests run the real ones)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from google.protobuf import text_format
from sagemaker_tfs.model_discovery import ModelSpec
from sagemaker_tfs.stack_config import StackConfig
from sagemaker_tfs.supervisor.model_servers.model_service_client import (
    ModelServiceError,
    ModelState,
)
from sagemaker_tfs.supervisor.model_servers.shared_model_servers import SharedModelServers
from sagemaker_tfs.supervisor.multi_model.registry import BackEndServer, ModelLoadError
from sagemaker_tfs.wire import protos
from stack_configs import StackConfigBuilder


class FakeModelService:
    """Serves exactly what the last reload sent; ``broken`` models fail to load; while
    ``down`` every call fails as on a model server that is gone."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.reloads: list[list[str]] = []
        self.served: set[str] = set()
        self.broken: set[str] = set()
        self.down = False
        self.on_reload = lambda: None

    def reload(self, models, timeout: float) -> str | None:
        names = [model.name for model in models]
        self.on_reload()
        if self.down:
            raise ModelServiceError(None, "connection refused")
        self.reloads.append(names)
        self.served = set(names)
        failed = self.served & self.broken
        return f"{sorted(failed)} failed" if failed else None

    def state(self, name: str) -> ModelState:
        if self.down:
            raise ModelServiceError(None, "connection refused")
        if name in self.broken:
            return ModelState(False, f"Loading servable {name} failed: not a SavedModel")
        if name not in self.served:
            return ModelState(False, f"Could not find any versions of model {name}")
        return ModelState(True)

    def close(self) -> None:
        pass


class Processes:
    """The model server pids the supervisor would report."""

    def __init__(self) -> None:
        self.pids: dict[str, int | None] = {}

    def model_server_pid(self, key: str) -> int | None:
        return self.pids.get(key, 4242)


@pytest.fixture
def config(stack_config: StackConfigBuilder) -> StackConfig:
    return stack_config(
        {"SAGEMAKER_MULTI_MODEL": "true", "SAGEMAKER_SAFE_PORT_RANGE": "30000-30010"}
    )


def shared(config: StackConfig, processes: Processes | None = None) -> SharedModelServers:
    Path(config.work.root).mkdir(parents=True, exist_ok=True)  # the supervisor makes it first
    servers = SharedModelServers(config, processes or Processes(), FakeModelService)
    for server in servers.servers:
        assert in_line(servers, server.key)
    return servers


def in_line(servers: SharedModelServers, key: str, timeout: float = 5) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if servers.ready(key):
            return True
        time.sleep(0.01)
    return False


def spec(name: str) -> ModelSpec:
    return ModelSpec(name, f"/models/{name}", (1,))


def fake(servers: SharedModelServers, index: int = 0) -> FakeModelService:
    return servers.servers[index].client  # type: ignore[return-value]


def listed_in_file(servers: SharedModelServers) -> list[str]:
    config = protos.message_class("tensorflow.serving.ModelServerConfig")()
    text_format.Parse(Path(servers.config_file).read_text(), config)
    return [model.name for model in config.model_config_list.config]


def test_each_load_and_unload_reloads_with_every_wanted_model(config: StackConfig) -> None:
    servers = shared(config)
    instances = servers.place("a")
    assert instances == config.instances
    for name in ("a", "b", "c"):
        servers.load(spec(name), instances)
    servers.unload("b", instances)
    assert fake(servers).reloads[1:] == [["a"], ["a", "b"], ["a", "b", "c"], ["a", "c"]]
    assert listed_in_file(servers) == ["a", "c"]
    assert Path(servers.empty_config_file).read_text().count("config:") == 0
    assert servers.start_config_file(failed_starts=0) == servers.config_file
    assert servers.start_config_file(failed_starts=1) == servers.empty_config_file


def test_a_model_that_fails_to_load_is_dropped_again(config: StackConfig) -> None:
    servers = shared(config)
    instances = servers.place("x")
    servers.load(spec("a"), instances)
    fake(servers).broken.add("bad")
    with pytest.raises(ModelLoadError, match="Loading servable bad failed: not a SavedModel"):
        servers.load(spec("bad"), instances)
    assert fake(servers).reloads[-2:] == [["a", "bad"], ["a"]]  # sent, then taken back
    assert listed_in_file(servers) == ["a"]
    servers.load(spec("b"), instances)
    assert fake(servers).reloads[-1] == ["a", "b"]


def test_a_load_whose_model_server_dies_fails_and_is_not_in_the_file(config: StackConfig) -> None:
    processes = Processes()
    servers = shared(config, processes)
    instances = servers.place("x")
    servers.load(spec("a"), instances)
    service = fake(servers)

    def die() -> None:
        service.down = True
        processes.pids["model-server[0]"] = None

    service.on_reload = die
    with pytest.raises(ModelLoadError, match=r"model-server\[0\] exited while it loaded"):
        servers.load(spec("crasher"), instances)
    assert listed_in_file(servers) == ["a"]  # what the restarted model server starts with
    # the restarted process is brought in line with the models that are still wanted
    service.on_reload = lambda: None
    service.down = False
    service.served = {"a"}
    processes.pids["model-server[0]"] = 5151
    assert not servers.ready("model-server[0]")
    assert in_line(servers, "model-server[0]")
    assert service.reloads[-1] == ["a"]


def test_a_restarted_model_server_is_ready_once_it_serves_the_registry(
    config: StackConfig,
) -> None:
    processes = Processes()
    servers = shared(config, processes)
    lost: list[tuple[str, str]] = []
    servers.on_lost = lambda name, reason: lost.append((name, reason))
    instances = servers.place("x")
    for name in ("a", "b", "c"):
        servers.load(spec(name), instances)
    service = fake(servers)
    processes.pids["model-server[0]"] = 5151  # a new process, started from the file
    service.served = set()
    service.broken.add("b")  # its files went away meanwhile
    assert in_line(servers, "model-server[0]")
    assert service.served == {"a", "c"}
    assert [name for name, _ in lost] == ["b"]
    assert "not a SavedModel" in lost[0][1]
    assert listed_in_file(servers) == ["a", "c"]


def test_a_model_server_that_is_not_back_yet_is_not_ready(config: StackConfig) -> None:
    processes = Processes()
    servers = shared(config, processes)
    service = fake(servers)
    service.down = True
    processes.pids["model-server[0]"] = 5151
    assert not in_line(servers, "model-server[0]", timeout=0.3)
    service.down = False
    assert in_line(servers, "model-server[0]", timeout=3)  # retried after a pause
    processes.pids["model-server[0]"] = None  # gone: never ready
    assert not servers.ready("model-server[0]")


def test_an_unload_while_a_restart_is_brought_in_line_is_not_lost(config: StackConfig) -> None:
    """The reload that brings a new process in line may have left before an unload: the
    model must not stay loaded in it."""
    processes = Processes()
    servers = shared(config, processes)
    instances = servers.place("x")
    for name in ("a", "b"):
        servers.load(spec(name), instances)
    service = fake(servers)
    entered, release = threading.Event(), threading.Event()

    def slow_first_reload() -> None:
        service.on_reload = lambda: None
        entered.set()
        release.wait(5)

    service.on_reload = slow_first_reload
    processes.pids["model-server[0]"] = 5151
    assert not servers.ready("model-server[0]")  # starts bringing it in line
    assert entered.wait(5)
    servers.unload("b", instances)  # its own reload is skipped: the process is not in line
    release.set()
    assert in_line(servers, "model-server[0]")
    deadline = time.monotonic() + 5
    while service.served != {"a"} and time.monotonic() < deadline:
        time.sleep(0.01)
    assert service.reloads[-2:] == [["a", "b"], ["a"]]


def test_several_model_servers_all_load_each_model(stack_config: StackConfigBuilder) -> None:
    config = stack_config(
        {
            "SAGEMAKER_MULTI_MODEL": "true",
            "SAGEMAKER_SAFE_PORT_RANGE": "30000-30010",
            "SAGEMAKER_TFS_INSTANCE_COUNT": "3",
        }
    )
    servers = shared(config)
    assert servers.copies == 3
    servers.load(spec("a"), servers.place("a"))
    assert [fake(servers, i).served for i in range(3)] == [{"a"}] * 3
    targets = {fake(servers, i).target for i in range(3)}
    assert len(targets) == 3 and all(t.startswith("unix:") for t in targets)
    fake(servers, 2).broken.add("b")
    with pytest.raises(ModelLoadError):
        servers.load(spec("b"), servers.place("b"))
    assert [fake(servers, i).served for i in range(3)] == [{"a"}] * 3


class StartingProcesses(Processes):
    """Records what the back end asks of the launcher at the stack's start."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[tuple[str, str]] = []
        self.ready_checks: dict[str, Callable[[], bool]] = {}
        self.config_files: dict[str, Callable[[int], str]] = {}

    def start_model_server(self, key, instance, config_file, ready) -> None:
        self.asked.append(("start", key))
        self.ready_checks[key] = ready
        self.config_files[key] = config_file

    def wait_until_ready(self, key: str) -> None:
        self.asked.append(("wait", key))
        assert in_line(self.servers, key)  # its own readiness check, as the launcher runs it


def test_the_shared_model_servers_start_with_the_stack_and_are_watched_in_line(
    stack_config: StackConfigBuilder,
) -> None:
    config = stack_config(
        {
            "SAGEMAKER_MULTI_MODEL": "true",
            "SAGEMAKER_SAFE_PORT_RANGE": "30000-30010",
            "SAGEMAKER_TFS_INSTANCE_COUNT": "2",
        }
    )
    Path(config.work.root).mkdir(parents=True, exist_ok=True)
    processes = StartingProcesses()
    servers = SharedModelServers(config, processes, FakeModelService)
    processes.servers = servers
    servers.start()
    keys = ["model-server[0]", "model-server[1]"]
    assert processes.asked == [("start", k) for k in keys] + [("wait", k) for k in keys]
    assert all(processes.ready_checks[key]() for key in keys)  # in line by now
    assert processes.config_files["model-server[0]"](0) == servers.config_file
    assert processes.config_files["model-server[0]"](1) == servers.empty_config_file
    assert servers.watched() == [
        BackEndServer(key, instance, (), ready_once_in_line=True)
        for key, instance in zip(keys, config.instances, strict=True)
    ]
