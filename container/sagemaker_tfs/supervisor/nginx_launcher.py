"""nginx, the front tier: its config written, the public port held, its process started, the
wait until it answers on that port, and its stop (the port closed first)."""

from __future__ import annotations

import logging
import shutil
import signal
from functools import partial
from pathlib import Path

from sagemaker_tfs.supervisor import nginx_config
from sagemaker_tfs.supervisor.processes.children import Child
from sagemaker_tfs.supervisor.processes.process_groups import DrainingGroups, group_connections
from sagemaker_tfs.supervisor.processes.sockets import HeldPort, http_answers
from sagemaker_tfs.supervisor.processes.startup import StartupError, TierLauncher, exit_of

logger = logging.getLogger(__name__)

TIER = "nginx"
NGINX_START_SECONDS = 30.0
# Starts of an nginx killed during start-up (see _wait_for_public_port).
NGINX_START_ATTEMPTS = 3


class NginxLauncher(TierLauncher):
    """Starts nginx on the public port, which it holds from the first start to the stop."""

    name = TIER

    def __post_init__(self) -> None:
        super().__post_init__()
        self.work_dir = Path(self.config.work.root)
        self.public_port = HeldPort(self.config.port)
        self._handed_from: object = None  # the dead master's Popen, once handed over from

    def start(self) -> None:
        try:
            text = nginx_config.render(self.config)
        except nginx_config.NginxConfigError as error:
            raise StartupError(f"cannot write the nginx config: {error}") from None
        path = self.work_dir / "nginx.conf"
        path.write_text(text, encoding="utf-8")
        logger.info("nginx config %s:\n%s", path, text.rstrip())
        try:
            fd = self.public_port.ensure()
        except OSError as error:
            raise StartupError(f"cannot listen on port {self.config.port}: {error}") from None
        binary = shutil.which("nginx") or "/usr/sbin/nginx"
        argv = [binary, "-c", str(path), "-p", str(self.work_dir) + "/", "-e", "stderr"]
        (self.work_dir / "nginx.pid").unlink(missing_ok=True)
        nginx = Child(
            "nginx",
            argv,
            {**self.env, **self.public_port.inherit_env()},
            stop_signal=signal.SIGQUIT,
            stop_timeout=self.config.nginx.proxy_read_timeout + 5,
            ready_check=lambda: self._nginx_listens(nginx),
            # SIGTERM, not SIGKILL: the master then stops its workers, which have no
            # parent-death signal of their own, before it exits.
            death_signal=signal.SIGTERM,
            pass_fds=(fd,),
            before_start=lambda: self._hand_over_port(nginx),
            # A master that dies leaves its workers serving the connections they hold, while
            # the new master, started at once, takes every new connection on the same port.
            # Once they hold none (or after stop_timeout) they get a graceful quit.
            leftovers_drain_signal=signal.SIGQUIT,
        )
        nginx.draining = DrainingGroups(
            TIER, self._holds_connections, nginx.stop_timeout, self.public_port.forget
        )
        self.children.start(TIER, nginx)
        self._wait_for_public_port(nginx)
        nginx.mark_ready()

    def begin_stop(self) -> None:
        """nginx keeps its own copy of the public port while it finishes the requests in
        flight; closed here first, no new connection waits in a backlog nobody will serve."""
        self.public_port.close()

    def _hand_over_port(self, nginx: Child) -> None:
        """Before a restart: the workers a ready master left keep the current listening
        socket, and the new master gets a new one that takes every new connection."""
        previous, process = nginx.pid, nginx.process
        if previous is not None and previous in nginx.draining and process is not self._handed_from:
            self.public_port.hand_over(previous)
            self._handed_from = process  # once: a start that failed to spawn is tried again

    def _holds_connections(self, pgid: int) -> bool:
        return group_connections(pgid, self.config.port) > 0

    def _nginx_listens(self, nginx: Child) -> bool:
        return read_pid(self.work_dir / "nginx.pid") == nginx.pid and http_answers(
            self.config.port, "/execution-parameters"
        )

    def _wait_for_public_port(self, nginx: Child) -> None:
        """nginx listens, or start-up fails (e.g. the port is taken).

        nginx writes its pid file once it has its sockets, and a worker answering HTTP shows
        that it accepts on the port the supervisor holds (a connection alone would be queued).

        Clients reach nginx as soon as it answers, a moment before this check sees it: an nginx
        killed by a signal meanwhile crashed while serving, and is started again. One that
        exits with a code of its own (bad config, port taken) fails the start-up.
        """
        listens = partial(self._nginx_listens, nginx)
        for _ in range(NGINX_START_ATTEMPTS):
            if self.wait_while_starting(nginx, listens, NGINX_START_SECONDS):
                return
            if nginx.running() or not was_killed(nginx):
                break
            logger.warning(
                "nginx (pid %d) %s during start-up; starting it again", nginx.pid, exit_of(nginx)
            )
            nginx.restart_after_crash()
        if not nginx.running():
            raise StartupError(f"nginx {exit_of(nginx)} during start-up (see its log above)")
        raise StartupError(f"nginx did not listen on port {self.config.port} in time")


def was_killed(child: Child) -> bool:
    """The child's process ended by a signal (a crash or a kill), not by exiting itself."""
    code = child.exit_code()
    return code is not None and code < 0


def read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None
