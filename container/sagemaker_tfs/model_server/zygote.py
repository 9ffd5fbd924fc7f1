"""``python -m sagemaker_tfs.model_server.zygote PARENT_PID``: model servers forked on demand.

One process imports TensorFlow and the model server's modules once, then forks a model
server for every command line it is sent, in milliseconds, however many model servers die in
a row (the standby it replaces serves one restart, then a new one imports for seconds). Its
stdin is a socket to the supervisor
(``sagemaker_tfs.supervisor.model_servers.model_server_zygote``):

- once imported it writes ``ready``; a line with a JSON list (a model server's command line,
  ``... sagemaker_tfs.cli model-server FLAGS``) is answered with the pid of a model server
  running those flags; an empty read (the supervisor went away) ends it.
- the line ``"spare"`` is answered with the pid of a *spare*: a fork of the zygote itself
  (TensorFlow's pages shared until written), with the supervisor's end of the spare's own
  socket passed along with the pid (``SCM_RIGHTS``). The spare writes ``ready`` on it and
  then serves as the zygote does; the supervisor keeps it to take the zygote's place the
  moment the zygote dies, with no import.
- each model server is forked twice (the middle process exits at once), so that it becomes
  the supervisor's own child (a child subreaper, or PID 1 in the container) and the supervisor
  waits for it and signals its process group as for any model server; it leads a session of
  its own and is SIGKILLed when the supervisor dies, like a spawned one.

A fork is only safe in a process with one thread: TensorFlow's and gRPC's imports start none,
and OpenBLAS's pool (started with NumPy) stops at a fork (its own fork handler) and starts
again only when used. ``main`` forks once to stop it, then refuses to serve (exit code 3) if
a thread is left.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import os
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable, Sequence

from sagemaker_tfs.model_server import main as model_server_main
from sagemaker_tfs.model_server.standby import flags_of, preload, set_title

IMPORTING_TITLE = "sagemaker-tfs zygote standby model server (importing TensorFlow)"
WAITING_TITLE = "sagemaker-tfs zygote standby model server (waiting)"
SPARE_TITLE = "sagemaker-tfs zygote standby model server (spare, waiting)"
SPARE = "spare"
READY = b"ready\n"
NOT_SINGLE_THREADED = 3
PR_SET_PDEATHSIG = 1
REPARENT_SECONDS = 2.0
AUTOGROUP_FILE = "/proc/self/autogroup"


def thread_count() -> int:
    return len(os.listdir("/proc/self/task"))


def stop_library_threads() -> None:
    """Fork once and reap the child: libraries' fork handlers stop their thread pools."""
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


def run_model_server(argv: Sequence[str]) -> int:
    """What a forked model server runs once detached: the model server ``argv`` names."""
    set_title(" ".join(argv))
    return model_server_main.main(flags_of(argv))


def fork_model_server(
    argv: Sequence[str], parent: int, run: Callable[[Sequence[str]], int] = run_model_server
) -> int:
    """The pid of a process running ``run(argv)``, already reparented to ``parent``.

    The process tells its own pid once it leads a session of its own: the supervisor signals
    a model server by its session (its process group), so the pid is not handed out before
    that group exists (a kill in between would miss it)."""
    read_end, write_end = os.pipe()
    middle = os.fork()
    if middle == 0:
        os.close(read_end)
        try:
            if os.fork() == 0:
                os.setsid()
                os.write(write_end, str(os.getpid()).encode())
                os.close(write_end)
                become(argv, parent, run)
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        pid = pipe.read()  # until the middle and the server have both closed it
    os.waitpid(middle, 0)  # once it is reaped, its child is the parent's
    if not pid:
        raise ChildProcessError("the forked model server died before it led its session")
    return int(pid)


def become(argv: Sequence[str], parent: int, run: Callable[[Sequence[str]], int]) -> None:
    """Detach from the zygote, then ``run(argv)`` and exit with its code; never returns."""
    code = 1
    try:
        detach(parent)
        code = run(argv)
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def detach(parent: int) -> None:
    """In the session it leads: ``parent``'s child that dies with it, stdin from /dev/null,
    and in its own autogroup the zygote's nice value (as ``spawning.child_setup`` does)."""
    follow_parent(parent)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    niceness = os.nice(0)
    if niceness:
        with contextlib.suppress(OSError), open(AUTOGROUP_FILE, "w", encoding="ascii") as group:
            group.write(str(niceness))


def follow_parent(parent: int) -> None:
    """Wait until the middle process is gone and ``parent`` is ours, then die with it."""
    deadline = time.monotonic() + REPARENT_SECONDS
    while os.getppid() != parent:
        if time.monotonic() > deadline:
            raise RuntimeError(f"not reparented to the supervisor (pid {parent})")
        time.sleep(0.001)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, ctypes.c_ulong(signal.SIGKILL))
    if os.getppid() != parent:
        os._exit(1)


def serve(
    channel: socket.socket, parent: int, run: Callable[[Sequence[str]], int] = run_model_server
) -> None:
    """Answer each command line read from ``channel`` with the pid of a process running it."""
    channel.sendall(READY)
    with channel.makefile("rb") as lines:
        for line in lines:
            set_title(WAITING_TITLE)  # a spare asked for anything has taken the zygote's place
            request = json.loads(line)
            if request == SPARE:
                fork_spare(channel, parent, run)
                continue
            argv = [str(arg) for arg in request]
            channel.sendall(f"{fork_model_server(argv, parent, run)}\n".encode())


def fork_spare(channel: socket.socket, parent: int, run: Callable[[Sequence[str]], int]) -> None:
    """Fork a copy of this zygote, adopted by ``parent`` as a model server is, and send its
    pid on ``channel`` with the supervisor's end of the copy's own socket."""
    ours, theirs = socket.socketpair()
    try:
        pid = fork_model_server(
            [SPARE], parent, lambda _argv: serve_as_spare(ours, theirs, parent, run)
        )
    finally:
        ours.close()
    try:
        socket.send_fds(channel, [f"{pid}\n".encode()], [theirs.fileno()])
    finally:
        theirs.close()


def serve_as_spare(
    ours: socket.socket,
    theirs: socket.socket,
    parent: int,
    run: Callable[[Sequence[str]], int],
) -> int:
    """In the spare (detached, stdin on /dev/null): its own socket becomes its stdin, as the
    zygote's is, so that no model server it forks keeps it open; then it serves."""
    theirs.close()
    os.dup2(ours.fileno(), 0)
    ours.close()
    set_title(SPARE_TITLE)
    serve(socket.socket(fileno=0), parent, run)
    return 0


def single_threaded() -> bool:
    """Whether a fork is safe here: libraries' pools stopped, no thread but this one."""
    stop_library_threads()
    return thread_count() == 1


def main(args: Sequence[str] | None = None) -> int:
    parent = int((sys.argv[1:] if args is None else args)[0])
    set_title(IMPORTING_TITLE)
    preload()
    if not single_threaded():
        sys.stderr.write(f"model server zygote: {thread_count()} threads after the imports\n")
        return NOT_SINGLE_THREADED
    gc.freeze()  # the imports' objects: a collection in a model server would write their pages
    set_title(WAITING_TITLE)
    serve(socket.socket(fileno=0), parent)
    return 0


if __name__ == "__main__":
    sys.exit(main())
