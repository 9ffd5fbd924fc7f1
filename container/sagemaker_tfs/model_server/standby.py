"""``python -m sagemaker_tfs.model_server.standby``: a model server waiting for its flags.

It imports TensorFlow and the model server's modules, then reads one line from stdin: the
JSON list of a model server's command line (``... sagemaker_tfs.cli model-server FLAGS``).
It then takes that command line as its process title (what ``ps`` shows) and runs as that
model server. An empty stdin (the supervisor went away) ends it. The supervisor keeps one
waiting: see ``sagemaker_tfs.supervisor.model_servers.standby_model_server``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence

from sagemaker_tfs.model_server import main as model_server_main

IMPORTING_TITLE = "sagemaker-tfs standby model server (importing TensorFlow)"
WAITING_TITLE = "sagemaker-tfs standby model server (waiting)"
COMMAND = "model-server"


def flags_of(argv: Sequence[str]) -> list[str]:
    """The flags after ``model-server`` in a model server's command line."""
    if COMMAND not in argv:
        raise ValueError(f"not a model server command line: {argv!r}")
    return list(argv[list(argv).index(COMMAND) + 1 :])


def set_title(title: str) -> None:
    """Best effort: ``setproctitle`` is optional (the ``model-server`` extra has it)."""
    try:
        from setproctitle import setproctitle
    except ImportError:
        return
    setproctitle(title)


def preload() -> None:
    """What a model server imports before it can load a model, TensorFlow first."""
    model_server_main.import_tensorflow_quietly()
    from sagemaker_tfs.model_server import server_setup  # noqa: F401
    from sagemaker_tfs.model_server.grpc import server as grpc_server  # noqa: F401
    from sagemaker_tfs.model_server.rest import server as rest_server  # noqa: F401
    from sagemaker_tfs.model_server.serving import manager, servable, tflite_servable  # noqa: F401


def wait_for_command_line() -> list[str] | None:
    line = sys.stdin.buffer.readline()
    if not line:
        return None
    argv = json.loads(line)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    return [str(arg) for arg in argv]


def main() -> int:
    set_title(IMPORTING_TITLE)
    preload()
    set_title(WAITING_TITLE)
    argv = wait_for_command_line()
    if argv is None:
        return 0
    set_title(" ".join(argv))
    return model_server_main.main(flags_of(argv))


if __name__ == "__main__":
    sys.exit(main())
