"""The supervisor's end of the model server zygote's socket (``model_server/zygote.py``).

A request is one line: a model server's command line as a JSON list, answered with the pid
of the model server forked for it, or ``"spare"``, answered with the pid of a fork of the
zygote itself and, passed along with it (``SCM_RIGHTS``), the supervisor's end of the
spare's own socket. A zygote (or a spare) writes ``ready`` once it can fork. Both kinds of
process are forked twice, so they are the supervisor's own children: ``ForkedProcess`` is the
Popen for them.
"""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import threading
import time
from collections.abc import Sequence

from sagemaker_tfs.supervisor.model_servers.warm_process import kill_group

FORK_SECONDS = 5.0
SPARE = b'"spare"\n'


class ForkedProcess(subprocess.Popen[bytes]):
    """A Popen for a child the zygote forked: ``poll``, ``wait`` and signals work as for one
    Popen started (they need only the pid of a child of this process)."""

    def __init__(self, pid: int, args: Sequence[str]) -> None:  # noqa: PLW0231
        # Popen.__init__ would start a process; these are the attributes its methods read.
        self.args = list(args)
        self.pid = pid
        self.returncode = None
        self.stdin = self.stdout = self.stderr = None
        self.text_mode = False
        self.encoding = self.errors = None
        self.universal_newlines = False
        self._child_created = True
        self._waitpid_lock = threading.Lock()
        self._input = None
        self._communication_started = False
        self._sigint_wait_secs = 0.25
        self._closed_child_pipe_fds = True


class SpareZygote:
    """A fork of the zygote kept to take its place: a process owner (``owned_processes``:
    ``process`` is set under its lock), and the supervisor's end of the spare's socket."""

    def __init__(self) -> None:
        self.process: subprocess.Popen[bytes] | None = None
        self.channel: socket.socket | None = None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def discard(self) -> None:
        if self.channel is not None:
            self.channel.close()
        if self.process is not None and self.process.poll() is None:
            kill_group(self.process)


def ask_for_model_server(channel: socket.socket, argv: Sequence[str]) -> int:
    """The pid of a model server running ``argv``, forked by the zygote at ``channel``."""
    channel.sendall(json.dumps(list(argv)).encode() + b"\n")
    return int(read_line(channel, FORK_SECONDS))


def ask_for_spare(channel: socket.socket) -> tuple[int, socket.socket]:
    """The pid of a spare the zygote forked, and the socket it passed along (SCM_RIGHTS)."""
    channel.sendall(SPARE)
    if not select.select([channel], [], [], FORK_SECONDS)[0]:
        raise ValueError(f"no spare within {FORK_SECONDS:.0f}s")
    data, fds, _flags, _address = socket.recv_fds(channel, 64, 1)
    if not fds:
        raise ValueError(f"no socket came with the spare's pid: {data!r}")
    os.set_inheritable(fds[0], False)  # as every socket Python opens: no spawned process's
    spare_channel = socket.socket(fileno=fds[0])
    if not data.endswith(b"\n"):
        spare_channel.close()
        raise ValueError(f"a cut answer: {data!r}")
    return int(data), spare_channel


def read_line(channel: socket.socket, timeout: float) -> str:
    """One line from the zygote (ValueError if it closed or took longer than ``timeout``)."""
    data = b""
    deadline = time.monotonic() + timeout
    while not data.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([channel], [], [], remaining)[0]:
            raise ValueError(f"no answer within {timeout:.0f}s")
        chunk = channel.recv(64)
        if not chunk:
            raise ValueError("it closed its end")
        data += chunk
    return data.decode().strip()
