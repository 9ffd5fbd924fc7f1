"""The multi-model registry: model names and URLs, ports, memory, loads that fail."""

from __future__ import annotations

import http.server
import json
import os
import threading
import time
from pathlib import Path

import pytest
from cgroup_trees import V1_NO_LIMIT, hybrid, legacy, unified
from launchers import RecordingLauncher, StuckLauncher
from sagemaker_tfs.container_limits import CgroupView
from sagemaker_tfs.ports import Instance, PortRange
from sagemaker_tfs.supervisor.model_servers.per_model_servers import PerModelServers, PortPool
from sagemaker_tfs.supervisor.multi_model.memory import (
    DEFAULT_OVERHEAD_BYTES,
    ModelMemory,
    available_memory_bytes,
    cgroup_headroom,
    files_bytes,
)
from sagemaker_tfs.supervisor.multi_model.registry import (
    MIB,
    ModelRegistry,
    resolve_model_url,
    validate_model_name,
)
from sagemaker_tfs.wire.errors import HttpError
from stack_configs import StackConfigBuilder, make_model, with_settings


@pytest.mark.parametrize("name", ["", "a" * 129, "../x", "a b", 'a"b', "-x", ".hidden", 5, None])
def test_invalid_model_names(name: object) -> None:
    with pytest.raises(HttpError) as error:
        validate_model_name(name)
    assert error.value.status == 400


def test_valid_model_names() -> None:
    for name in ("half_plus_three", "m-1.2", "A" * 128):
        assert validate_model_name(name) == name


def test_model_url_must_stay_inside_the_root(tmp_path: Path) -> None:
    root = tmp_path / "models"
    make_model(root / "good")
    make_model(tmp_path / "outside")
    (root / "link").symlink_to(tmp_path / "outside")
    assert resolve_model_url("good", str(root), "g") == str(root / "good")
    assert resolve_model_url(str(root / "good"), str(root), "g") == str(root / "good")
    for url in ("../outside", str(tmp_path / "outside"), "link", "/etc", ".", "good/../.."):
        with pytest.raises(HttpError) as error:
            resolve_model_url(url, str(root), "x")
        assert error.value.status == 403, url
    for url in ("", None, 3, "a\x00b"):
        with pytest.raises(HttpError) as error:
            resolve_model_url(url, str(root), "x")
        assert error.value.status == 400


def test_model_url_without_version_dir_is_404(tmp_path: Path) -> None:
    root = tmp_path / "models"
    (root / "empty" / "abc").mkdir(parents=True)
    with pytest.raises(HttpError) as error:
        resolve_model_url("empty", str(root), "e")
    assert error.value.status == 404
    assert error.value.message == "Could not find valid base path empty for servable e"


def test_port_pool_hands_out_and_takes_back() -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        pool = PortPool(PortRange(taken, taken + 4), reserved=[taken + 1])
        first = pool.take_pair()
        assert first is not None and taken not in (first.grpc_port, first.rest_port)
        assert taken + 1 not in (first.grpc_port, first.rest_port)
        assert pool.take_pair() is None  # taken, taken+1 unavailable; only 3 left
        pool.release(first)
        assert pool.take_pair() == first


def test_available_memory(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 100 kB\nMemAvailable:  2048 kB\n")
    no_cgroup = CgroupView(tmp_path / "no-cgroup")
    assert available_memory_bytes(str(meminfo), no_cgroup) == 2048 * 1024
    assert available_memory_bytes(str(tmp_path / "missing"), no_cgroup) is None


def test_registry_refuses_with_507_when_memory_is_low(
    stack_config: StackConfigBuilder, tmp_path: Path
) -> None:
    make_model(tmp_path / "models" / "m")
    config = stack_config(
        {"SAGEMAKER_MULTI_MODEL": "true", "SAGEMAKER_SAFE_PORT_RANGE": "40000-40100"}
    )
    launcher = RecordingLauncher()
    servers = PerModelServers(config, launcher)
    registry = ModelRegistry(config, servers, memory_margin=10**9, available_memory=lambda: 10)
    with pytest.raises(HttpError) as error:
        registry.load("m", "m")
    assert error.value.status == 507
    assert error.value.message == (
        "Not enough memory to load model m: it needs about 16 MB, 0 MB available"
    )
    assert launcher.started == [] and registry.list() == []


def test_a_load_that_cannot_finish_fails_within_the_wait_time_and_cleans_up(
    stack_config: StackConfigBuilder,
    tmp_path: Path,
) -> None:
    make_model(tmp_path / "models" / "m")
    config = stack_config({"SAGEMAKER_MULTI_MODEL": "true", "SAGEMAKER_TFS_WAIT_TIME_SECONDS": "1"})
    config = with_settings(config, "multi_model", server_per_model=True)
    launcher = StuckLauncher()
    registry = ModelRegistry(config, PerModelServers(config, launcher))
    started = time.monotonic()
    with pytest.raises(HttpError) as error:
        registry.load("m", "m")
    assert time.monotonic() - started < 1 + 5  # the wait, plus one status poll's timeout
    assert "failed to load" in error.value.message
    assert launcher.stopped == launcher.started == ["model-server[m]"]
    assert registry.list() == []


class FakeServers:
    """A ModelServers stand-in: a load "takes" ``per_load`` bytes of RSS."""

    copies = 1

    def __init__(self, per_load: int = 0) -> None:
        self.per_load = per_load
        self.rss = 100 * MIB
        self.loaded: list[str] = []
        self.unloaded: list[str] = []
        self.release_load = threading.Event()
        self.release_load.set()
        self.during_load = lambda: None

    def place(self, name: str) -> tuple[Instance, ...]:
        return (Instance(1, 2),)

    def load(self, model, instances) -> None:
        self.release_load.wait(10)
        self.during_load()
        self.loaded.append(model.name)
        self.rss += self.per_load

    def unload(self, name: str, instances) -> None:
        self.unloaded.append(name)

    def rss_bytes(self, name: str) -> int:
        return self.rss

    def close(self) -> None:
        pass


def mme_config(stack_config: StackConfigBuilder, tmp_path: Path, *names: str):
    for name in names:
        make_model(tmp_path / "models" / name)
    return stack_config({"SAGEMAKER_MULTI_MODEL": "true"})


def test_the_model_files_count_before_the_load(
    stack_config: StackConfigBuilder, tmp_path: Path
) -> None:
    config = mme_config(stack_config, tmp_path, "small")
    big = make_model(tmp_path / "models" / "big")
    with open(big / "1" / "variables.data", "wb") as sparse:  # 4 GiB that take no disk
        sparse.truncate(4 << 30)
    servers = FakeServers()
    registry = ModelRegistry(
        config, servers, memory_margin=256 * MIB, available_memory=lambda: 2 << 30
    )
    with pytest.raises(HttpError) as error:
        registry.load("big", "big")
    assert error.value.status == 507
    assert "it needs about 4112 MB, 2048 MB available" in error.value.message
    assert registry.load("small", "small")["state"] == "AVAILABLE"
    assert servers.loaded == ["small"]


def test_loads_in_flight_count_against_the_memory(
    stack_config: StackConfigBuilder, tmp_path: Path
) -> None:
    config = mme_config(stack_config, tmp_path, "a", "b")
    servers = FakeServers()
    servers.release_load.clear()
    free = 256 * MIB + 20 * MIB  # room for one model's default estimate (16 MB), not two
    registry = ModelRegistry(
        config, servers, memory_margin=256 * MIB, available_memory=lambda: free
    )
    first = threading.Thread(target=registry.load, args=("a", "a"))
    first.start()
    deadline = time.monotonic() + 5
    while not registry.list() and time.monotonic() < deadline:
        time.sleep(0.01)
    with pytest.raises(HttpError) as error:
        registry.load("b", "b")
    assert error.value.status == 507
    servers.release_load.set()
    first.join(10)
    assert [m["model_name"] for m in registry.list()] == ["a"]


def test_a_model_that_leaves_too_little_memory_is_unloaded_again(
    stack_config: StackConfigBuilder, tmp_path: Path
) -> None:
    config = mme_config(stack_config, tmp_path, "a", "b")
    servers = FakeServers(per_load=300 * MIB)
    free = [1024 * MIB]

    def available() -> int:
        return free[0]

    registry = ModelRegistry(config, servers, memory_margin=256 * MIB, available_memory=available)
    loaded = registry.load("a", "a")
    assert loaded["memory_bytes"] == 300 * MIB
    servers.per_load = 800 * MIB  # more than the estimate: the check after the load sees it
    servers.during_load = lambda: free.__setitem__(0, 200 * MIB)
    with pytest.raises(HttpError) as error:
        registry.load("b", "b")
    assert error.value.status == 507
    assert "it took 800 MB and left 200 MB; it was unloaded again" in error.value.message
    assert servers.unloaded == ["b"] and [m["model_name"] for m in registry.list()] == ["a"]


def test_the_overhead_per_model_is_learned_from_measured_loads() -> None:
    memory = ModelMemory()
    assert memory.estimate(files=10 * MIB, copies=2) == 20 * MIB + 2 * DEFAULT_OVERHEAD_BYTES
    memory.learn(measured=600 * MIB, files=10 * MIB, copies=1)  # a process per model
    assert memory.estimate(files=10 * MIB, copies=1) == 10 * MIB + 590 * MIB
    memory.learn(measured=0, files=10 * MIB, copies=1)  # largest of the recent ones counts
    assert memory.estimate(files=0, copies=1) == 590 * MIB


def test_files_bytes_counts_the_served_versions(tmp_path: Path) -> None:
    base = make_model(tmp_path / "m", "00000123", "7")
    (base / "00000123" / "variables").mkdir()
    (base / "00000123" / "variables" / "variables.data").write_bytes(b"x" * 1000)
    (base / "7" / "saved_model.pb").write_bytes(b"y" * 10)
    assert files_bytes(str(base), (123,)) == 1000
    assert files_bytes(str(base), (7, 123)) == 1010
    assert files_bytes(str(tmp_path / "missing"), (1,)) == 0


@pytest.mark.parametrize("layout", ["v2", "v1", "hybrid"])
def test_a_cgroup_limit_counts_as_well_as_meminfo(tmp_path: Path, layout: str) -> None:
    """In any cgroup layout: the limit less what the cgroup holds, file cache counted free."""
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemAvailable:  8388608 kB\n")  # 8 GiB on the host
    if layout == "v2":
        tree = unified(tmp_path / "root")
        limit_file, folder = "memory_max", "/sys/fs/cgroup"
        usage = {"memory_current": str(900 * MIB)}
    else:
        tree = (legacy if layout == "v1" else hybrid)(tmp_path / "root")
        limit_file, folder = "memory_limit_in_bytes", "/sys/fs/cgroup/memory"
        usage = {"memory_usage_in_bytes": str(900 * MIB)}
    stat = f"anon 1\ninactive_file {100 * MIB}\nactive_file 5"
    tree.write(folder, **{limit_file: "1073741824", "memory_stat": stat}, **usage)  # 1 GiB
    assert cgroup_headroom(tree.view()) == 224 * MIB
    assert available_memory_bytes(str(meminfo), tree.view()) == 224 * MIB
    tree.write(folder, **{limit_file: "max" if layout == "v2" else V1_NO_LIMIT})
    assert available_memory_bytes(str(meminfo), tree.view()) == 8 << 30


def test_list_pages_by_name_with_sagemakers_keys(
    stack_config: StackConfigBuilder, tmp_path: Path
) -> None:
    config = mme_config(stack_config, tmp_path, "a", "b", "c")
    registry = ModelRegistry(config, FakeServers(), available_memory=lambda: None)
    for name in ("c", "a", "b"):
        registry.load(name, name)
    assert registry.list_page(None, 2) == {
        "models": [{"modelName": "a", "modelUrl": "a"}, {"modelName": "b", "modelUrl": "b"}],
        "nextPageToken": "b",
    }
    registry.unload("a")  # a model unloaded between pages changes nothing after the token
    assert registry.list_page("b", 2) == {
        "models": [{"modelName": "c", "modelUrl": "c"}],
        "nextPageToken": None,
    }
    assert registry.list_page(None, 5)["nextPageToken"] is None
    assert registry.describe_public("c") == {"modelName": "c", "modelUrl": "c"}
    with pytest.raises(HttpError) as error:
        registry.describe_public("a")
    assert error.value.status == 404


class AvailableLauncher(RecordingLauncher):
    """Each model server it starts is a stand-in answering TF Serving's REST status call
    with its model AVAILABLE on the REST port the back end gave it; a ``stuck`` one runs and
    never answers."""

    def __init__(self, stuck: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.stuck = stuck
        self.running: dict[str, http.server.ThreadingHTTPServer | None] = {}

    def start_model_server(self, key, instance, config_file, ready) -> None:
        super().start_model_server(key, instance, config_file, ready)
        if key in self.stuck:
            self.running[key] = None
            return
        server = http.server.ThreadingHTTPServer(("127.0.0.1", instance.rest_port), Available)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.running[key] = server

    def stop_model_server(self, key: str) -> None:
        server = self.running.pop(key)
        if server is not None:
            server.shutdown()
            server.server_close()

    def model_server_pid(self, key: str) -> int | None:
        return os.getpid() if key in self.running else None


class Available(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802
        body = json.dumps({"model_version_status": [{"version": "1", "state": "AVAILABLE"}]})
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


def test_one_process_per_model_watches_each_loaded_model_until_it_is_unloaded(
    stack_config: StackConfigBuilder, tmp_path: Path
) -> None:
    """/ping counts on the model server of each AVAILABLE model: not one whose load failed,
    not one that was unloaded."""
    make_model(tmp_path / "models" / "m")
    make_model(tmp_path / "models" / "stuck")
    config = stack_config({"SAGEMAKER_MULTI_MODEL": "true", "SAGEMAKER_TFS_WAIT_TIME_SECONDS": "1"})
    config = with_settings(config, "multi_model", server_per_model=True)
    launcher = AvailableLauncher(stuck=("model-server[stuck]",))
    servers = PerModelServers(config, launcher)
    registry = ModelRegistry(config, servers)
    assert servers.watched() == []
    registry.load("m", "m")
    (watched,) = servers.watched()
    assert (watched.key, watched.models, watched.ready_once_in_line) == (
        "model-server[m]",
        ("m",),
        False,
    )
    assert watched.instance == registry._get("m").instances[0]
    with pytest.raises(HttpError):
        registry.load("stuck", "stuck")
    assert servers.watched() == [watched]
    registry.unload("m")
    assert servers.watched() == []
    assert launcher.started == ["model-server[m]", "model-server[stuck]"]
