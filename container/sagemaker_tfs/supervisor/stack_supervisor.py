"""The ``Supervisor``: starts the stack's tiers in order, watches them, stops them.

Start-up order: the model servers; with one model set, the Python service under gunicorn and the
stream server beside it while the model servers import TensorFlow and load (0.55 s of the
service's start-up off the cold start), then the wait until their models are AVAILABLE;
multi-model, the control API and the service. Then the health monitor (``health.py``: the
verdict ``/ping`` answers, kept from then on) and last nginx, so that ``/ping`` cannot answer
200 before the models are ready. How each tier's processes are built, watched and stopped is its
launcher's business (``model_server_launcher``, ``service_launcher``, ``nginx_launcher``: each a
``startup.TierLauncher``); the Supervisor only orders the tiers and gives each its deadline. A
child that exits is logged and restarted (see ``children.Child``). Stopping (``/ping`` 503 from
its first moment) goes the other way: each tier begins to stop (nginx's port closed, the stream
server told, so that it closes its WebSockets with 1001, which nginx would otherwise wait for;
the standby gone), then nginx gracefully (SIGQUIT lets in-flight requests finish), gunicorn and
the stream server, the model servers, within 26 s of the stop (SageMaker's SIGKILL comes at
30 s).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

from sagemaker_tfs.stack_config import StackConfig
from sagemaker_tfs.supervisor import nginx_launcher, service_launcher
from sagemaker_tfs.supervisor.metrics.endpoint import MetricsServer, start_metrics_endpoint
from sagemaker_tfs.supervisor.model_servers import model_server_launcher
from sagemaker_tfs.supervisor.model_servers.health import HealthMonitor
from sagemaker_tfs.supervisor.model_servers.model_server_launcher import ModelServerLauncher
from sagemaker_tfs.supervisor.model_servers.model_service_client import (
    FORK_SUPPORT_VARIABLE,
    USER_FORK_SUPPORT,
)
from sagemaker_tfs.supervisor.model_servers.per_model_servers import PerModelServers
from sagemaker_tfs.supervisor.model_servers.shared_model_servers import SharedModelServers
from sagemaker_tfs.supervisor.multi_model.code_download import CodeDownloadError, download_code
from sagemaker_tfs.supervisor.multi_model.control_api import ControlServer
from sagemaker_tfs.supervisor.multi_model.registry import ModelRegistry, ModelServers
from sagemaker_tfs.supervisor.nginx_launcher import NginxLauncher
from sagemaker_tfs.supervisor.processes.children import Child, reap_orphans
from sagemaker_tfs.supervisor.processes.startup import POLL_SECONDS, StartupError, TierLauncher
from sagemaker_tfs.supervisor.service_launcher import ServiceLauncher
from sagemaker_tfs.wire.metrics import MULTIPROCESS_DIR_ENV

logger = logging.getLogger(__name__)

# The tiers, in start order: they stop in reverse (nginx first).
TIERS = (model_server_launcher.TIER, service_launcher.TIER, nginx_launcher.TIER)
# SageMaker sends SIGKILL 30 s after SIGTERM (scale-in): each tier is stopped by then (a request
# still in flight at 22 s is cut, one warning line), so that serve exits 0 in time.
STOP_DEADLINES = dict(zip(TIERS, (26.0, 24.0, 22.0), strict=True))


class Supervisor:
    """Owns the tiers of one stack (their launchers), the health monitor, the metrics
    endpoint and the multi-model registry; it is the ``ObservedStack`` the metrics read."""

    def __init__(self, config: StackConfig) -> None:
        self.config = config
        self.stop_requested = threading.Event()
        self.serving = False
        env = child_environment(config)
        launched = (config, env, self.stop_requested)
        self.model_servers = ModelServerLauncher(*launched, lambda: self.serving)
        self.service = ServiceLauncher(*launched)
        self.nginx = NginxLauncher(*launched)
        # In start order (``TIERS``): they are watched and stopped in reverse.
        self.tiers: tuple[TierLauncher, ...] = (self.model_servers, self.service, self.nginx)
        self.registry: ModelRegistry | None = None
        self.multi_model_servers: ModelServers | None = None
        self.health: HealthMonitor | None = None
        self.control: ControlServer | None = None
        self.metrics: MetricsServer | None = None

    def write_configs(self) -> None:
        Path(self.config.work.root).mkdir(parents=True, exist_ok=True)
        Path(self.config.work.health_file).unlink(missing_ok=True)  # a verdict of an earlier run
        Path(self.config.work.stack_config_path).write_text(self.config.to_json(), encoding="utf-8")
        self.model_servers.write_configs()

    def start(self) -> None:
        self.write_configs()
        if self.config.metrics.enabled:
            self._start_metrics_endpoint()
        if self.config.multi_model.enabled:
            self._download_universal_code()
            self._start_control_api(self._multi_model_servers())
            self._start_health_monitor()
            self.service.start(with_stream_server=False)
        else:
            self.model_servers.launch_single_model()
            self.service.start(with_stream_server=True)  # while TensorFlow imports
            self.model_servers.wait_for_single_model()
            self._start_health_monitor()
        self.nginx.start()
        self.serving = True
        logger.info("serving on port %d", self.config.port)

    def _download_universal_code(self) -> None:
        """Shared code from S3, before gunicorn (its hook installs the requirements)."""
        multi = self.config.multi_model
        if multi.universal_code_dir is None:
            return
        assert multi.universal_bucket and multi.universal_prefix
        try:
            download_code(multi.universal_bucket, multi.universal_prefix, multi.universal_code_dir)
        except CodeDownloadError as error:
            raise StartupError(str(error)) from None

    def _start_metrics_endpoint(self) -> None:
        self.metrics = start_metrics_endpoint(self.config, self)
        logger.info(
            "metrics on %s (unix:%s)", self.config.metrics.path, self.config.work.metrics_socket
        )

    # --- what the metrics read (metrics.stack.ObservedStack) ---

    def children(self) -> list[Child]:
        """Every tier's children, nginx's first (the order they stop in)."""
        return [child for tier in reversed(self.tiers) for child in tier.members()]

    def model_server_children(self) -> list[Child]:
        return self.model_servers.members()

    def serves_model(self, name: str) -> bool:
        """Whether the stack serves a model of that name now (metrics count only those by
        name: requests may name any)."""
        if self.registry is not None:
            return self.registry.serves(name)
        return any(model.name == name for model in self.config.models)

    def models_loaded(self) -> int | None:
        if not self.config.multi_model.enabled:
            return None
        return len(self.registry.list()) if self.registry is not None else 0

    def _multi_model_servers(self) -> ModelServers:
        """One process per model, or the shared model servers, started now (see registry.py)."""
        servers: ModelServers
        if self.config.multi_model.server_per_model:
            logger.info("multi-model: one model server process per loaded model")
            servers = PerModelServers(self.config, self.model_servers)
        else:
            count = len(self.config.instances)
            logger.info("multi-model: %d model server(s) shared by every model", count)
            servers = SharedModelServers(self.config, self.model_servers)
        servers.start()
        return servers

    def _start_health_monitor(self) -> None:
        """The verdict ``/ping`` answers from, checked from now on (see health.py)."""
        self.health = HealthMonitor(
            self.config.work.health_file,
            lambda: self.model_servers.watched(self.multi_model_servers),
        )
        self.health.start()

    def _start_control_api(self, servers: ModelServers) -> None:
        self.multi_model_servers = servers
        self.registry = ModelRegistry(self.config, servers)
        loads = self.metrics.loads if self.metrics is not None else None
        self.control = ControlServer(self.config.work.control_socket, self.registry, loads)
        self.control.serve_in_background()
        logger.info("multi-model control API on unix:%s", self.config.work.control_socket)

    # --- watching and stopping ---

    def watch(self) -> None:
        """Restart what exits until a stop is asked. An error in one round is logged and the
        next round goes on: a watch loop that ended would leave the endpoint unsupervised."""
        last_error = ""
        while not self.stop_requested.wait(POLL_SECONDS):
            try:
                self._watch_once()
            except Exception as error:  # noqa: BLE001 - logged; the next round tries again
                if repr(error) != last_error:  # once, not ten times a second
                    logger.exception("error while watching the children")
                last_error = repr(error)
            else:
                last_error = ""

    def _watch_once(self) -> None:
        for tier in reversed(self.tiers):
            tier.check(time.monotonic())
        reap_orphans()

    def shutdown(self) -> None:
        """nginx (in-flight requests finish), gunicorn, model servers: by ``STOP_DEADLINES``."""
        started = time.monotonic()
        logger.info("stopping the stack")
        if self.health is not None:
            self.health.stop("The endpoint is stopping")
        if self.control is not None:
            self.control.close()
        stopping = list(reversed(self.tiers))
        for tier in stopping:  # before any tier is waited for (see startup.TierLauncher)
            tier.begin_stop()
        for tier in stopping:
            tier.stop(started + STOP_DEADLINES[tier.name])
        if self.metrics is not None:  # after nginx: its last log lines are still read
            self.metrics.close()
        if self.registry is not None:
            self.registry.close()
        logger.info("stopped")


# glibc gives every allocation above 32 MB fresh pages from mmap and returns them on free, so
# each tensor of tens of MB is page-faulted in anew on every request: joining 53 MB took
# 110-160 ms that way and 11-25 ms in reused heap memory (docs/performance.md). Children keep
# freed memory up to this size instead; the user's own MALLOC_* settings win.
MALLOC_REUSE_BYTES = str(256 << 20)
MALLOC_DEFAULTS = {
    "MALLOC_MMAP_THRESHOLD_": MALLOC_REUSE_BYTES,
    "MALLOC_TRIM_THRESHOLD_": MALLOC_REUSE_BYTES,
}


def child_environment(config: StackConfig) -> dict[str, str]:
    """The environment of every child (each launcher adds its own variables)."""
    env = dict(os.environ)
    env.pop(MULTIPROCESS_DIR_ENV, None)
    env.pop(FORK_SUPPORT_VARIABLE, None)  # the supervisor's own (see model_service_client.py)
    if USER_FORK_SUPPORT is not None:
        env[FORK_SUPPORT_VARIABLE] = USER_FORK_SUPPORT
    env["OMP_NUM_THREADS"] = config.model_servers.omp_num_threads
    env["PYTHONUNBUFFERED"] = "1"
    for name, value in MALLOC_DEFAULTS.items():
        env.setdefault(name, value)
    return env
