"""What the stack is configured with: the frozen ``StackConfig``, which holds the settings of
each tier (settings.py) and the work directory's paths, written by the supervisor to
``WORK_DIR/stack.json`` and read back by the service's processes with ``StackConfig.load``.
config.py makes it from the environment."""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass

from sagemaker_tfs.json_fields import JsonObject
from sagemaker_tfs.model_discovery import ModelSpec
from sagemaker_tfs.ports import Instance, PortRange
from sagemaker_tfs.settings import SERVICE_READY_MARKER as SERVICE_READY_MARKER
from sagemaker_tfs.settings import (
    BatchTransformSettings,
    Limits,
    MetricsSettings,
    ModelServerSettings,
    MultiModelSettings,
    NginxSettings,
    ServiceSettings,
    SessionSettings,
    StreamSettings,
    WorkDir,
)

# The variable that tells the service's processes where the supervisor wrote the StackConfig.
STACK_CONFIG_ENV = "SAGEMAKER_TFS_STACK_CONFIG"


@dataclass(frozen=True)
class StackConfig:
    """Everything the supervisor, nginx and the Python service need to know."""

    model_dir: str
    port: int
    # The container's CPU count (container_limits.cpu_count): what "CPUs" means in README's
    # table, the model servers' TensorFlow pools and REST threads.
    cpus: int
    models: tuple[ModelSpec, ...]
    default_model: str | None
    code_dir: str | None
    # The shared model servers' ports (per-model ones get theirs when a model loads).
    instances: tuple[Instance, ...]
    safe_port_range: PortRange | None
    # Linux's scheduling policy for every process of the stack: "normal" (SCHED_OTHER, the
    # default) or "batch" (SCHED_BATCH: a process that wakes does not preempt the one running).
    sched_policy: str
    work: WorkDir
    nginx: NginxSettings
    service: ServiceSettings
    model_servers: ModelServerSettings
    multi_model: MultiModelSettings
    batch: BatchTransformSettings
    metrics: MetricsSettings
    limits: Limits
    stream: StreamSettings
    sessions: SessionSettings

    @property
    def invocation_timeout(self) -> int:
        """Seconds an invocation may take from its arrival: ``SAGEMAKER_MODEL_SERVER_TIMEOUT``
        where set, else nginx's read timeout (``_timeouts`` makes ``model_servers.timeout``
        exactly that). A request still waiting past it is not sent to a model server."""
        return self.model_servers.timeout

    @property
    def shared_code_dir(self) -> str | None:
        """The code whose ``requirements.txt`` is installed at start: ``MODEL_DIR/code``,
        else (multi-model) the downloaded universal code."""
        return self.code_dir or self.multi_model.universal_code_dir

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, data: object) -> StackConfig:
        """The StackConfig of ``to_json``'s document; ``ValueError`` naming the first field
        missing or of the wrong type."""
        return _stack_config(JsonObject.of(data, "stack.json"))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> StackConfig:
        """Read the JSON the supervisor wrote (``SAGEMAKER_TFS_STACK_CONFIG``)."""
        with open(path, encoding="utf-8") as stream:
            return cls.from_dict(json.load(stream))


def _stack_config(data: JsonObject) -> StackConfig:
    port_range = data.optional_child("safe_port_range")
    return StackConfig(
        model_dir=data.string("model_dir"),
        port=data.integer("port"),
        cpus=data.integer("cpus"),
        models=tuple(_model(m) for m in data.children("models")),
        default_model=data.optional_string("default_model"),
        code_dir=data.optional_string("code_dir"),
        instances=tuple(
            Instance(i.integer("grpc_port"), i.integer("rest_port"))
            for i in data.children("instances")
        ),
        safe_port_range=(
            None
            if port_range is None
            else PortRange(port_range.integer("low"), port_range.integer("high"))
        ),
        sched_policy=data.string("sched_policy"),
        work=WorkDir(data.child("work").string("root")),
        nginx=data.child("nginx").settings(NginxSettings),
        service=data.child("service").settings(ServiceSettings),
        model_servers=data.child("model_servers").settings(ModelServerSettings),
        multi_model=data.child("multi_model").settings(MultiModelSettings),
        batch=data.child("batch").settings(BatchTransformSettings),
        metrics=data.child("metrics").settings(MetricsSettings),
        limits=data.child("limits").settings(Limits),
        stream=data.child("stream").settings(StreamSettings),
        sessions=data.child("sessions").settings(SessionSettings),
    )


def _model(data: JsonObject) -> ModelSpec:
    versions = data.integers("versions") if "versions" in data else ()
    return ModelSpec(data.string("name"), data.string("base_path"), versions)
