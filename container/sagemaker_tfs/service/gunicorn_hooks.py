"""gunicorn configuration hooks (``--config=python:sagemaker_tfs.service.gunicorn_hooks``).

``on_starting`` runs once in the master before any worker exists: the place to pip-install
``code/requirements.txt`` (multi-model: ``MODEL_DIR/code``, else the code downloaded from
S3). A failure is raised there, so gunicorn exits at once with pip's
message instead of workers failing to boot one after another.

``post_fork`` runs in each new worker: it dies with its master (parent-death signal), so a
killed master leaves no worker serving the old socket.
"""

from __future__ import annotations

import ctypes
import os
import signal
from typing import Any

from sagemaker_tfs.config import STACK_CONFIG_ENV, StackConfig
from sagemaker_tfs.service.handlers import ensure_requirements
from sagemaker_tfs.service.logs import configure_logging


def on_starting(server: Any) -> None:
    config = StackConfig.load(os.environ[STACK_CONFIG_ENV])
    configure_logging(config.gunicorn_log_level)
    ensure_requirements(config.shared_code_dir, config.work_dir)


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def post_fork(server: Any, worker: Any) -> None:
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return
    prctl(PR_SET_PDEATHSIG, ctypes.c_ulong(signal.SIGKILL))
    if os.getppid() != worker.ppid:  # the master died before prctl
        os._exit(1)
