"""gunicorn configuration hooks (``--config=python:sagemaker_tfs.service.gunicorn_hooks``).

``on_starting`` runs once in the master before any worker exists: the place to pip-install
``code/requirements.txt`` (multi-model: ``MODEL_DIR/code``, else the code downloaded from
S3). A failure is raised there, so gunicorn exits at once with pip's
message instead of workers failing to boot one after another.
"""

from __future__ import annotations

import os
from typing import Any

from sagemaker_tfs.config import StackConfig
from sagemaker_tfs.service.handlers import ensure_requirements
from sagemaker_tfs.service.logs import configure_logging

# Same as ``app.STACK_CONFIG_ENV``; importing app here would import requests before gevent
# patches the workers' sockets.
STACK_CONFIG_ENV = "SAGEMAKER_TFS_STACK_CONFIG"


def on_starting(server: Any) -> None:
    config = StackConfig.load(os.environ[STACK_CONFIG_ENV])
    configure_logging(config.gunicorn_log_level)
    ensure_requirements(config.shared_code_dir, config.work_dir)
