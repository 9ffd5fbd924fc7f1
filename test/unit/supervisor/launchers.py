"""Stand-ins for the Supervisor as the registry's Launcher: no process is started."""

from __future__ import annotations


class RecordingLauncher:
    """Records start requests; the memory check must refuse before any process starts."""

    def __init__(self) -> None:
        self.started: list[str] = []

    def start_model_server(self, key, instance, model_config_file, model_names) -> None:
        self.started.append(key)

    def stop_model_server(self, key: str) -> None:
        pass

    def model_server_pid(self, key: str) -> int | None:
        return None


class StuckLauncher(RecordingLauncher):
    """A model server that runs but never makes its model AVAILABLE."""

    def __init__(self) -> None:
        super().__init__()
        self.stopped: list[str] = []

    def stop_model_server(self, key: str) -> None:
        self.stopped.append(key)

    def model_server_pid(self, key: str) -> int | None:
        return 1 if key in self.started and key not in self.stopped else None
