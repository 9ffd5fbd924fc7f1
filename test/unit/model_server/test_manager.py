"""ModelManager logic with a loader that stands in for TensorFlow (version dirs are real).

The integration tests run the manager with real SavedModels; here the loader is a plain
function so retries, policies and unloading can be checked quickly and exactly.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sagemaker_tfs.model_server.errors import Code, ServingError
from sagemaker_tfs.model_server.serving import manager as manager_module
from sagemaker_tfs.model_server.serving.manager import ModelManager
from tensorflow_serving.apis import get_model_status_pb2
from tensorflow_serving.config import model_server_config_pb2

State = get_model_status_pb2.ModelVersionStatus.State


class LoadedVersion:
    """What the loader returns: enough of a Servable for the manager (name, version, close)."""

    def __init__(self, name: str, version: int) -> None:
        self.name = name
        self.version = version
        self.closed = False

    def close(self) -> None:
        self.closed = True


class Loader:
    """Loads every version, except that the first ``failures`` attempts per version fail."""

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.attempts: dict[int, int] = {}
        self.loaded: list[LoadedVersion] = []

    def __call__(self, name: str, version: int, path: str) -> LoadedVersion:
        self.attempts[version] = self.attempts.get(version, 0) + 1
        if self.attempts[version] <= self.failures:
            raise OSError(f"cannot read {path}")
        servable = LoadedVersion(name, version)
        self.loaded.append(servable)
        return servable


def _config(base: Path, policy: str = "", labels: dict[str, int] | None = None):
    config = model_server_config_pb2.ModelServerConfig()
    model = config.model_config_list.config.add()
    model.name = "m"
    model.base_path = str(base)
    model.model_platform = "tensorflow"
    if policy == "latest2":
        model.model_version_policy.latest.num_versions = 2
    for label, version in (labels or {}).items():
        model.version_labels[label] = version
    return config


def _status(manager: ModelManager) -> list[tuple[int, int]]:
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = "m"
    return [(s.version, s.state) for s in manager.get_model_status(request).model_version_status]


def _wait_until_closed(loaded: list[LoadedVersion]) -> dict[int, bool]:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not any(s.closed for s in loaded):
        time.sleep(0.01)
    return {s.version: s.closed for s in loaded}


def _manager(loader: Loader, retries: int = 0) -> ModelManager:
    return ModelManager(
        loader, max_num_load_retries=retries, load_retry_interval_seconds=0.01, poll_wait_seconds=0
    )


def test_retries_until_success(tmp_path: Path) -> None:
    (tmp_path / "1").mkdir()
    loader = Loader(failures=2)
    manager = _manager(loader, retries=2)
    manager.reload_config(_config(tmp_path))
    assert loader.attempts == {1: 3}
    assert _status(manager) == [(1, State.AVAILABLE)]


def test_gives_up_after_max_retries(tmp_path: Path) -> None:
    (tmp_path / "1").mkdir()
    loader = Loader(failures=5)
    manager = _manager(loader, retries=1)
    manager.reload_config(_config(tmp_path))
    assert loader.attempts == {1: 2}
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = "m"
    [status] = manager.get_model_status(request).model_version_status
    assert status.state == State.END
    assert status.status.error_code == Code.UNKNOWN.value
    assert "cannot read" in status.status.error_message
    with pytest.raises(ServingError, match=r"Servable not found for request: Latest\(m\)"):
        manager.get_servable("m")


def test_a_load_failing_with_a_status_keeps_its_code(tmp_path: Path) -> None:
    """A loader's ``ServingError`` (a TFLite model's bad SignatureDefs, say) is the version's
    status with its own code, named by it, as TF Serving reports the load's status."""
    (tmp_path / "1").mkdir()

    def refuse(name: str, version: int, path: str) -> LoadedVersion:
        raise ServingError(Code.INVALID_ARGUMENT, "Invalid SignatureDefs found in TfLite model")

    manager = ModelManager(refuse, max_num_load_retries=0, poll_wait_seconds=0)
    manager.reload_config(_config(tmp_path))
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = "m"
    [status] = manager.get_model_status(request).model_version_status
    assert (status.state, status.status.error_code) == (State.END, Code.INVALID_ARGUMENT.value)
    assert status.status.error_message == (
        "Loading servable: {name: m version: 1} failed: INVALID_ARGUMENT: "
        "Invalid SignatureDefs found in TfLite model"
    )


@pytest.fixture
def polling_manager() -> Iterator[Callable[[Loader], ModelManager]]:
    """Makes managers that poll every 50 ms, shut down after the test: a poller left running
    would go on listing directories in the tests that follow (and through their stand-ins)."""
    managers: list[ModelManager] = []

    def make(loader: Loader) -> ModelManager:
        managers.append(ModelManager(loader, poll_wait_seconds=0.05))
        return managers[-1]

    yield make
    for manager in managers:
        manager.shutdown()


def test_rescan_loads_new_versions_then_unloads_old(
    tmp_path: Path, polling_manager: Callable[[Loader], ModelManager]
) -> None:
    for version in ("1", "2"):
        (tmp_path / version).mkdir()
    loader = Loader()
    manager = polling_manager(loader)
    manager.reload_config(_config(tmp_path, "latest2"))
    assert _status(manager) == [(2, State.AVAILABLE), (1, State.AVAILABLE)]
    (tmp_path / "3").mkdir()
    manager.start_polling()
    expected = [(3, State.AVAILABLE), (2, State.AVAILABLE), (1, State.END)]
    deadline = time.monotonic() + 5
    while _status(manager) != expected and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _status(manager) == expected
    assert manager.get_servable("m").version == 3
    closed = _wait_until_closed(loader.loaded)  # closing runs in the background
    assert closed == {1: True, 2: False, 3: False}
    with pytest.raises(ServingError, match=r"Specific\(m, 1\)"):
        manager.get_servable("m", version=1)


def test_labels(tmp_path: Path) -> None:
    for version in ("1", "2"):
        (tmp_path / version).mkdir()
    manager = _manager(Loader())
    manager.reload_config(_config(tmp_path, "latest2", {"stable": 1}))
    assert manager.get_servable("m", label="stable").version == 1
    with pytest.raises(ServingError) as caught:
        manager.get_servable("m", label="canary")
    assert caught.value.code == Code.INVALID_ARGUMENT
    assert caught.value.message == "Unrecognized servable version label: canary"
    with pytest.raises(ServingError) as caught:
        manager.reload_config(_config(tmp_path, "latest2", {"stable": 7}))
    assert caught.value.code == Code.FAILED_PRECONDITION
    assert manager.get_servable("m", label="stable").version == 1


def test_labels_for_unavailable_versions_when_allowed(tmp_path: Path) -> None:
    """``--allow_version_labels_for_unavailable_models``: a new label (or one that keeps its
    version) may name a version that is not available; moving a label still may not."""
    for version in ("1", "2"):
        (tmp_path / version).mkdir()
    manager = ModelManager(Loader(), poll_wait_seconds=0, allow_labels_for_unavailable=True)
    manager.reload_config(_config(tmp_path, "latest2", {"stable": 1, "next": 3}))
    assert manager.get_servable("m", label="stable").version == 1
    with pytest.raises(ServingError) as caught:
        manager.get_servable("m", label="next")
    assert caught.value.code == Code.NOT_FOUND  # labelled, but version 3 is not served
    manager.reload_config(_config(tmp_path, "latest2", {"stable": 1, "next": 3}))  # kept: fine
    with pytest.raises(ServingError) as caught:
        manager.reload_config(_config(tmp_path, "latest2", {"stable": 5, "next": 3}))
    assert caught.value.code == Code.FAILED_PRECONDITION
    assert manager.get_servable("m", label="stable").version == 1


class RecordingManager:
    """Stands in for ModelManager in the config poller: records the configs applied."""

    def __init__(self, failure: ServingError | None = None) -> None:
        self.applied: list[list[str]] = []
        self.failure = failure

    def reload_config(self, config) -> None:  # type: ignore[no-untyped-def]
        self.applied.append([model.name for model in config.model_config_list.config])
        if self.failure is not None:
            raise self.failure


def test_config_poller_applies_the_file_and_keeps_the_old_config_on_errors(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import threading

    from sagemaker_tfs.model_server.model_config_polling import ConfigFilePoller

    path = tmp_path / "models.config"
    path.write_text(
        "model_config_list { config { name: 'a' base_path: '/a' model_platform: 'tensorflow' } }"
    )
    manager = RecordingManager()
    poller = ConfigFilePoller(manager, str(path), 60, threading.Event())  # type: ignore[arg-type]
    poller.poll_once()
    poller.poll_once()  # unchanged: applied again, as TF Serving does
    assert manager.applied == [["a"], ["a"]]
    path.write_text("model_config_list { config { nme: 'b' } }")
    poller.poll_once()
    assert manager.applied == [["a"], ["a"]]
    assert "Failed to read ModelServerConfig file: Invalid protobuf file: " in caplog.text
    assert "Error parsing text-format tensorflow.serving.ModelServerConfig" in caplog.text
    path.unlink()
    poller.poll_once()
    assert f"Failed to read ModelServerConfig file: {path}; No such file or directory" in (
        caplog.text
    )
    path.write_text(
        "model_config_list { config { name: 'c' base_path: '/c' model_platform: 'tensorflow' } }"
    )
    refusing = RecordingManager(ServingError(Code.FAILED_PRECONDITION, "label trouble"))
    ConfigFilePoller(refusing, str(path), 60, threading.Event()).poll_once()  # type: ignore[arg-type]
    assert "PollFilesystemAndReloadConfig failed to ReloadConfig: label trouble" in caplog.text


def test_removed_model_is_unloaded(tmp_path: Path) -> None:
    (tmp_path / "1").mkdir()
    loader = Loader()
    closed_before_collection: list[bool] = []
    manager = ModelManager(
        loader,
        poll_wait_seconds=0,
        after_unload=lambda: closed_before_collection.append(loader.loaded[0].closed),
    )
    manager.reload_config(_config(tmp_path))
    manager.reload_config(model_server_config_pb2.ModelServerConfig())
    with pytest.raises(ServingError, match="Could not find any versions of model m"):
        _status(manager)
    deadline = time.monotonic() + 5
    while not closed_before_collection and time.monotonic() < deadline:
        time.sleep(0.01)
    assert closed_before_collection == [True]  # the memory is collected once it is closed


def _models_config(base: Path, names: list[str], policy: str = ""):
    config = model_server_config_pb2.ModelServerConfig()
    for name in names:
        model = config.model_config_list.config.add()
        model.name = name
        model.base_path = str(base / name)
        model.model_platform = "tensorflow"
        if policy:
            model.model_version_policy.latest.num_versions = 2
    return config


def test_a_reload_touches_only_the_models_that_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Adding one model to many lists one directory and loads one model: the others are
    neither rescanned nor reloaded (a new version of theirs waits for the poller)."""
    names = [f"m{index}" for index in range(200)]
    for name in [*names, "new"]:
        (tmp_path / name / "1").mkdir(parents=True)
    loader = Loader()
    manager = _manager(loader)
    manager.reload_config(_models_config(tmp_path, names))
    assert len(loader.loaded) == 200
    (tmp_path / "m0" / "2").mkdir()
    listed: list[str] = []
    real_list_versions = manager_module.list_versions
    monkeypatch.setattr(
        manager_module,
        "list_versions",
        lambda base_path: listed.append(base_path) or real_list_versions(base_path),
    )
    manager.reload_config(_models_config(tmp_path, [*names, "new"]))
    assert set(listed) == {str(tmp_path / "new")}  # listed to load, then once loaded
    assert [servable.name for servable in loader.loaded[200:]] == ["new"]
    assert manager.get_servable("m0").version == 1
    # a changed entry (here its version policy) is looked at again
    config = _models_config(tmp_path, [*names, "new"])
    config.model_config_list.config[0].model_version_policy.latest.num_versions = 2
    listed.clear()
    manager.reload_config(config)
    assert set(listed) == {str(tmp_path / "m0")}
    assert manager.get_servable("m0").version == 2
    # removing one model unloads that one only
    manager.reload_config(_models_config(tmp_path, [*names[1:], "new"]))
    m0_versions = [servable for servable in loader.loaded if servable.name == "m0"]
    deadline = time.monotonic() + 5  # closing runs in the background
    while not all(servable.closed for servable in m0_versions) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [servable.name for servable in loader.loaded if servable.closed] == ["m0", "m0"]
    assert [name for name in [*names, "new"] if manager.serves(name)] == [*names[1:], "new"]


def test_a_reload_waits_for_its_own_loads_only(tmp_path: Path) -> None:
    """A reload answers once its new models loaded, not when an unrelated slow load ends."""
    for name in ("slow", "fast"):
        (tmp_path / name / "1").mkdir(parents=True)
    release = threading.Event()

    def loader(name: str, version: int, path: str) -> LoadedVersion:
        if name == "slow":
            release.wait(10)
        return LoadedVersion(name, version)

    manager = _manager(loader)  # type: ignore[arg-type]
    slow = threading.Thread(
        target=manager.reload_config, args=(_models_config(tmp_path, ["slow"]),)
    )
    slow.start()
    deadline = time.monotonic() + 5
    while not manager.serves("slow") and time.monotonic() < deadline:
        time.sleep(0.01)
    started = time.monotonic()
    manager.reload_config(_models_config(tmp_path, ["slow", "fast"]))
    assert time.monotonic() - started < 5
    assert manager.get_servable("fast").version == 1
    assert slow.is_alive()
    release.set()
    slow.join(10)
    assert manager.get_servable("slow").version == 1


def test_the_poller_lists_only_directories_that_changed(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    polling_manager: Callable[[Loader], ModelManager],
) -> None:
    for name in ("still", "moving"):
        (tmp_path / name / "1").mkdir(parents=True)
    old = time.time() - 60
    for name in ("still", "moving"):
        os.utime(tmp_path / name, (old, old))
    manager = polling_manager(Loader())
    manager.reload_config(_models_config(tmp_path, ["still", "moving"], policy="latest2"))
    listed: list[str] = []
    real_list_versions = manager_module.list_versions
    monkeypatch.setattr(
        manager_module,
        "list_versions",
        lambda base_path: listed.append(Path(base_path).name) or real_list_versions(base_path),
    )
    manager.start_polling()
    first_round = time.monotonic() + 10  # a loaded machine can hold the thread back for seconds
    while {"still", "moving"} - set(listed) and time.monotonic() < first_round:
        time.sleep(0.01)
    time.sleep(0.5)  # about ten more rounds
    assert listed.count("still") == listed.count("moving") == 1  # listed once, then stamped
    (tmp_path / "moving" / "2").mkdir()
    deadline = time.monotonic() + 5
    while manager.get_servable("moving").version != 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert manager.get_servable("moving").version == 2
    assert listed.count("still") == 1 and listed.count("moving") >= 2
