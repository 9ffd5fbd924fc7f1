"""The unit tests' one way to build a ``StackConfig`` (and the model directories it finds);
the fixtures in conftest.py hand these out."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sagemaker_tfs.config import load_config
from sagemaker_tfs.container_limits import CpuCount
from sagemaker_tfs.stack_config import StackConfig

# Every variable of the contract set to a value other than its default (test_config checks
# each one); the command-line tests reuse it.
EVERY_VARIABLE = {
    "SAGEMAKER_SAFE_PORT_RANGE": "20000-20010",
    "SAGEMAKER_TFS_INSTANCE_COUNT": "2",
    "SAGEMAKER_TFS_NGINX_LOGLEVEL": "info",
    "SAGEMAKER_NGINX_PROXY_READ_TIMEOUT_SECONDS": "120",
    "SAGEMAKER_GUNICORN_WORKERS": "3",
    "SAGEMAKER_GUNICORN_THREADS": "4",
    "SAGEMAKER_GUNICORN_WORKER_CLASS": "gthread",
    "SAGEMAKER_GUNICORN_TIMEOUT_SECONDS": "45",
    "SAGEMAKER_GUNICORN_LOGLEVEL": "debug",
    "SAGEMAKER_TFS_INTER_OP_PARALLELISM": "2",
    "SAGEMAKER_TFS_INTRA_OP_PARALLELISM": "3",
    "SAGEMAKER_TFS_WAIT_TIME_SECONDS": "10",
    "SAGEMAKER_BATCH": "true",
    "SAGEMAKER_MAX_CONCURRENT_TRANSFORMS": "5",
    "SAGEMAKER_BATCH_STRATEGY": "SingleRecord",
    "SAGEMAKER_MAX_PAYLOAD_IN_MB": "0",
    "SAGEMAKER_MULTI_MODEL_UNIVERSAL_BUCKET": "bucket",
    "SAGEMAKER_MULTI_MODEL_UNIVERSAL_PREFIX": "prefix/",
    "OMP_NUM_THREADS": "4",
    "SAGEMAKER_TFS_STANDBY_MODEL_SERVER": "false",
    "SAGEMAKER_TFS_IMAGE_SCALE": "0.0078125",
    "SAGEMAKER_TFS_IMAGE_OFFSET": "-1",
    "SAGEMAKER_TFS_METRICS": "false",
    "SAGEMAKER_TFS_METRICS_PATH": "/stack/metrics",
    "SAGEMAKER_TFS_ACCESS_LOG": "json",
    "SAGEMAKER_TFS_ACCESS_LOG_ALL": "true",
    "SAGEMAKER_MODEL_SERVER_TIMEOUT": "900",
    "SAGEMAKER_TFS_MAX_BODY_MB": "300",
    "SAGEMAKER_TFS_MAX_TEXT_BODY_MB": "50",
    "SAGEMAKER_TFS_STREAM_MAX_MESSAGE_MB": "2",
    "SAGEMAKER_TFS_STREAM_IDLE_TIMEOUT_SECONDS": "30",
    "SAGEMAKER_TFS_STREAM_MAX_CONNECTIONS": "7",
    "SAGEMAKER_TFS_STREAM_KEEPALIVE_SECONDS": "0",
    "SAGEMAKER_TFS_SESSIONS": "true",
    "SAGEMAKER_ENABLE_STATEFUL_SESSIONS": "false",
    "SAGEMAKER_TFS_SESSION_TTL_SECONDS": "30",
    "SAGEMAKER_TFS_MAX_SESSIONS": "7",
}


def make_model(base: Path, *versions: str) -> Path:
    """A model directory ``base`` with an (empty) SavedModel in each version (default "1")."""
    for version in versions or ("1",):
        (base / version).mkdir(parents=True)
        (base / version / "saved_model.pb").write_bytes(b"")
    return base


class StackConfigBuilder:
    """Builds a ``StackConfig`` as ``serve`` does (``load_config``), in the test's tmp_path.

    ``model_dir`` and ``work_dir`` are relative to tmp_path (absolute paths pass through);
    the default models directory holds ``half_plus_three`` version 00000123. ``work_dir=None``
    and ``port=None`` leave them to ``load_config``'s defaults. Keyword arguments that are not
    ``load_config``'s replace fields of the result.
    """

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path

    @property
    def model_dir(self) -> Path:
        """The default models directory (made on first use)."""
        root = self.tmp_path / "models"
        if not root.exists():
            make_model(root / "half_plus_three", "00000123")
        return root

    def __call__(
        self,
        env: dict[str, str] | None = None,
        *,
        model_dir: Path | str | None = None,
        work_dir: Path | str | None = "work",
        port: int | None = None,
        cpu_count: int = 2,
        has_gpu: Callable[[], bool] = lambda: False,
        **changes: Any,
    ) -> StackConfig:
        models = self.model_dir if model_dir is None else self.tmp_path / model_dir
        config = load_config(
            env or {},
            model_dir=str(models),
            work_dir=None if work_dir is None else str(self.tmp_path / work_dir),
            port=port,
            cpus=CpuCount(cpu_count, "machine", None, cpu_count, cpu_count),
            has_gpu=has_gpu,
        )
        return dataclasses.replace(config, **changes) if changes else config


def with_settings(config: StackConfig, tier: str, **changes: Any) -> StackConfig:
    """``config`` with fields of one tier's settings changed (``tier``: "multi_model", ...)."""
    settings = dataclasses.replace(getattr(config, tier), **changes)
    return dataclasses.replace(config, **{tier: settings})
