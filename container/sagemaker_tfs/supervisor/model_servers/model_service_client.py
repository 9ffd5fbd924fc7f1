"""The supervisor's gRPC client of a model server's ModelService: reload its config, ask a
model's state (waiting for it, or as a health check with a short deadline). The same two
calls work on ``tensorflow_model_server`` and on ours.

``HandleReloadConfigRequest`` takes the whole new ``ModelServerConfig``: the model server
loads the models that are new in it, unloads those that are gone and leaves the others
alone; it answers once the new ones have loaded or failed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass

# The supervisor forks its children while these channels live. gRPC's fork handlers then
# stop and restart its pollers around each fork ("epoll_wait error: Bad file descriptor" in
# the supervisor, and once in a while a child that dies before its exec); the supervisor's
# calls need no gRPC in its children. Read when gRPC is first imported, so set before; the
# children get the user's own setting back (``child_environment``).
FORK_SUPPORT_VARIABLE = "GRPC_ENABLE_FORK_SUPPORT"
USER_FORK_SUPPORT = os.environ.get(FORK_SUPPORT_VARIABLE)
os.environ[FORK_SUPPORT_VARIABLE] = "false"

import grpc  # noqa: E402
from google.protobuf.message import Message  # noqa: E402

from sagemaker_tfs.model_discovery import ModelSpec  # noqa: E402
from sagemaker_tfs.wire import protos  # noqa: E402

AVAILABLE = (
    protos.POOL.FindEnumTypeByName("tensorflow.serving.ModelVersionStatus.State")
    .values_by_name["AVAILABLE"]
    .number
)
STATUS_TIMEOUT_SECONDS = 10.0


class ModelServiceError(Exception):
    """A ModelService call failed (the model server is gone, or it refused the call)."""

    def __init__(self, code: grpc.StatusCode | None, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class ModelState:
    """A model's state in one model server: available, or the error that ended its load."""

    available: bool
    error: str | None = None


@dataclass(frozen=True)
class StatusAnswer:
    """One health check's GetModelStatus: whether the model server answered at all (within
    the deadline), and if so whether the model has an AVAILABLE version."""

    answered: bool
    available: bool = False
    detail: str = ""


def reload_request(models: Iterable[ModelSpec]) -> Message:
    """A ReloadConfigRequest serving exactly ``models``, each with every version it has
    (a ``specific`` version policy, as ``render_model_config`` writes it to the file)."""
    request = protos.ReloadConfigRequest()
    entries = request.config.model_config_list.config
    for model in models:
        entry = entries.add()
        entry.name = model.name
        entry.base_path = model.base_path
        entry.model_platform = "tensorflow"
        if model.versions:
            entry.model_version_policy.specific.versions.extend(model.versions)
    return request


class ModelServiceClient:
    """One channel to one model server (its unix socket, else its TCP port)."""

    def __init__(self, target: str) -> None:
        self.target = target
        self._channel = grpc.insecure_channel(
            target,
            options=[
                ("grpc.max_send_message_length", -1),
                ("grpc.max_receive_message_length", -1),
                # A restarted model server is reached again quickly.
                ("grpc.initial_reconnect_backoff_ms", 100),
                ("grpc.max_reconnect_backoff_ms", 1000),
            ],
        )
        self._stub = protos.ModelServiceStub(self._channel)

    def reload(self, models: Iterable[ModelSpec], timeout: float) -> str | None:
        """Serve exactly ``models``; waits (up to ``timeout``) for a model server that is
        still starting. Returns the model server's error message (a model that failed to load
        is one), or None; raises ModelServiceError when the call itself failed."""
        request = reload_request(models)
        try:
            response = self._stub.HandleReloadConfigRequest(
                request, timeout=timeout, wait_for_ready=True
            )
        except grpc.RpcError as error:
            if error.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise ModelServiceError(error.code(), error.details() or str(error)) from None
            return error.details() or str(error.code())
        if response.status.error_code:
            return response.status.error_message or f"error code {response.status.error_code}"
        return None

    def state(self, name: str, timeout: float = STATUS_TIMEOUT_SECONDS) -> ModelState:
        """Whether a version of ``name`` is AVAILABLE, else why it failed (None: not yet)."""
        request = protos.GetModelStatusRequest()
        request.model_spec.name = name
        try:
            response = self._stub.GetModelStatus(request, timeout=timeout, wait_for_ready=True)
        except grpc.RpcError as error:
            if error.code() == grpc.StatusCode.NOT_FOUND:
                return ModelState(False, error.details() or f"model {name} is not served")
            raise ModelServiceError(error.code(), error.details() or str(error)) from None
        versions = list(response.model_version_status)
        if any(version.state == AVAILABLE for version in versions):
            return ModelState(True)
        errors = [v.status.error_message for v in versions if v.status.error_code]
        return ModelState(False, "; ".join(errors) or None)

    def ask_state(self, name: str, timeout: float) -> Callable[[], StatusAnswer]:
        """Send GetModelStatus for ``name`` now and return the function that waits for its
        answer (at most ``timeout`` from now), so that one thread asks many model servers at
        once. Not waiting for a connection: a model server that is not there is a miss at once.
        Any answer of the model server counts as answered, NOT_FOUND included."""
        request = protos.GetModelStatusRequest()
        request.model_spec.name = name
        future = self._stub.GetModelStatus.future(request, timeout=timeout)

        def answer() -> StatusAnswer:
            try:
                response = future.result()
            except grpc.RpcError as error:
                code = error.code()
                detail = f"{code.name if code else 'no status'}: {error.details() or ''}".strip()
                missed = code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
                return StatusAnswer(answered=not missed, detail=detail)
            versions = response.model_version_status
            return StatusAnswer(True, any(version.state == AVAILABLE for version in versions))

        return answer

    def close(self) -> None:
        self._channel.close()
