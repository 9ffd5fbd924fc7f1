"""Fixtures that start real ``sagemaker-tfs model-server`` processes on free ports.

``start_model_server(*flags)`` is the factory every model server integration test uses
(gRPC, REST, batching, lifecycle). It picks free gRPC and REST ports (unless the flags set
them), waits for ``NET_LOG: Entering the event loop``, and terminates the process at
teardown. The process log (stdout and stderr merged) is kept in a file. Module-scoped
servers can use ``model_server_process.launch_model_server`` directly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from model_server_process import ServerHandle, launch_model_server, stop_server, wait_until_ready

__all__ = ["ServerHandle", "start_model_server"]


@pytest.fixture
def start_model_server(tmp_path: Path) -> Iterator[Callable[..., ServerHandle]]:
    """Factory: ``start_model_server("--model_name=x", "--model_base_path=/p")``.

    Keyword arguments: ``wait=False`` returns without waiting for the ready line;
    ``env={...}`` adds environment variables; ``affinity={0}`` the CPUs it may run on.
    """
    handles: list[ServerHandle] = []

    def start(
        *args: str,
        wait: bool = True,
        env: dict[str, str] | None = None,
        affinity: set[int] | None = None,
    ) -> ServerHandle:
        log_path = tmp_path / f"model_server_{len(handles)}.log"
        handle = launch_model_server(args, log_path, env, affinity)
        handles.append(handle)
        if wait:
            wait_until_ready(handle)
        return handle

    yield start
    for handle in handles:
        stop_server(handle)
