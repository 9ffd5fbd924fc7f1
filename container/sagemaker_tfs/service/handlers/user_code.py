"""User code: ``code/inference.py``, ``code/lib`` and ``code/requirements.txt``.

``handler(data, context)`` wins over ``input_handler`` + ``output_handler``;
``stream_handler(messages, context)`` serves the bidirectional stream (``stream_server.py``)
and may be the only handler of a single-model endpoint's script. Requirements
are installed once, before the service serves (gunicorn's ``on_starting`` hook), into
``WORK_DIR/user_packages`` so that the stack runs as a normal user; a failed install stops
start-up with pip's message.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import subprocess
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sagemaker_tfs.service.handlers.code_namespaces import CodeNamespace, import_file
from sagemaker_tfs.user_script import may_serve_invocations

logger = logging.getLogger(__name__)

SCRIPT_NAME = "inference.py"
PIP_OUTPUT_TAIL = 2000


class UserCodeError(RuntimeError):
    """``inference.py`` cannot be loaded or its requirements cannot be installed."""


@dataclass(frozen=True)
class UserCode:
    """The handlers found in one ``inference.py``."""

    path: str
    handler: Callable[..., Any] | None = None
    input_handler: Callable[..., Any] | None = None
    output_handler: Callable[..., Any] | None = None
    stream_handler: Callable[..., Any] | None = None

    @property
    def serves_requests(self) -> bool:
        """Whether the script has handlers for ``/invocations`` (not only a stream handler)."""
        return self.handler is not None or self.input_handler is not None


def script_path(code_dir: str | None) -> str | None:
    if not code_dir:
        return None
    path = os.path.join(code_dir, SCRIPT_NAME)
    return path if os.path.isfile(path) else None


def packages_dir(work_dir: str) -> str:
    """Where ``requirements.txt`` is installed (``pip install --target``)."""
    return os.path.join(work_dir, "user_packages")


def _prepend_sys_path(path: str) -> None:
    if os.path.isdir(path) and path not in sys.path:
        sys.path.insert(0, path)


def add_import_paths(code_dir: str | None, work_dir: str) -> None:
    """``code/lib`` first, then installed requirements, then ``code`` itself (single-model
    endpoints; a multi-model endpoint's models each have their ``code_namespaces``)."""
    if code_dir:
        _prepend_sys_path(code_dir)
    add_installed_packages(work_dir)
    if code_dir:
        _prepend_sys_path(os.path.join(code_dir, "lib"))


def add_installed_packages(work_dir: str) -> None:
    """The packages of the ``requirements.txt`` installed at start-up, on ``sys.path``."""
    _prepend_sys_path(packages_dir(work_dir))


def install_requirements(code_dir: str | None, work_dir: str) -> bool:
    """pip-install ``code/requirements.txt`` unless ``code/lib`` exists; True when installed."""
    if not code_dir:
        return False
    requirements = os.path.join(code_dir, "requirements.txt")
    if not os.path.isfile(requirements):
        return False
    if os.path.isdir(os.path.join(code_dir, "lib")):
        logger.info("code/lib exists: not installing %s", requirements)
        return False
    target = packages_dir(work_dir)
    command = [
        sys.executable, "-m", "pip", "install", "--no-input", "--disable-pip-version-check",
        "--no-cache-dir", "--quiet", "--target", target, "-r", requirements,
    ]  # fmt: skip
    logger.info("installing %s into %s", requirements, target)
    result = subprocess.run(command, cwd=code_dir, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        output = (result.stderr or result.stdout).strip()[-PIP_OUTPUT_TAIL:]
        raise UserCodeError(
            f"installing {requirements} failed (pip exit code {result.returncode}): {output}"
        )
    return True


def _requirements_digest(code_dir: str | None) -> str:
    path = os.path.join(code_dir or "", "requirements.txt")
    if not code_dir or not os.path.isfile(path):
        return "none"
    with open(path, "rb") as stream:
        return hashlib.sha256(stream.read()).hexdigest()


def ensure_requirements(code_dir: str | None, work_dir: str) -> None:
    """Install the requirements once per work dir, whichever process gets here first.

    gunicorn's ``on_starting`` hook (``gunicorn_hooks``) calls this in the master; the app
    factory calls it too, so the workers find the packages even when the hook was not used.
    A marker holding the requirements file's digest makes the second call a no-op.
    """
    os.makedirs(work_dir, exist_ok=True)
    marker = os.path.join(work_dir, "user_packages.done")
    digest = _requirements_digest(code_dir)
    with open(os.path.join(work_dir, "user_packages.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(marker):
            with open(marker, encoding="utf-8") as stream:
                if stream.read().strip() == digest:
                    return
        install_requirements(code_dir, work_dir)
        with open(marker, "w", encoding="utf-8") as stream:
            stream.write(digest + "\n")


def _module_name(path: str) -> str:
    digest = hashlib.sha1(os.path.abspath(path).encode("utf-8")).hexdigest()[:12]
    return f"sagemaker_tfs_user_inference_{digest}"


def load_script(path: str, allow_stream_only: bool = False) -> UserCode:
    """Import ``path`` under a name of its own (single-model endpoints: ``code/`` and
    ``code/lib`` are on ``sys.path``)."""
    try:
        module = import_file(path, _module_name(path))
    except Exception as error:
        raise UserCodeError(f"importing {path} failed: {type(error).__name__}: {error}") from error
    return handlers_of(module, path, allow_stream_only)


def load_script_in(namespace: CodeNamespace, path: str) -> UserCode:
    """Import ``path`` inside a model's code namespace (multi-model endpoints)."""
    try:
        module = namespace.load(path)
    except Exception as error:
        raise UserCodeError(f"importing {path} failed: {type(error).__name__}: {error}") from error
    return handlers_of(module, path)


def handlers_of(module: types.ModuleType, path: str, allow_stream_only: bool = False) -> UserCode:
    """The script's handlers; ``allow_stream_only``: a script with only ``stream_handler`` is
    accepted (single-model endpoints, where the bidirectional stream is served)."""
    stream_handler = getattr(module, "stream_handler", None)
    if not callable(stream_handler):
        stream_handler = None
    handler = getattr(module, "handler", None)
    if callable(handler):
        return UserCode(path=path, handler=handler, stream_handler=stream_handler)
    input_handler = getattr(module, "input_handler", None)
    output_handler = getattr(module, "output_handler", None)
    if callable(input_handler) and callable(output_handler):
        return UserCode(path=path, input_handler=input_handler, output_handler=output_handler,
                        stream_handler=stream_handler)  # fmt: skip
    if allow_stream_only and stream_handler is not None:
        return UserCode(path=path, stream_handler=stream_handler)
    stream_form = ", or stream_handler(messages, context)" if allow_stream_only else ""
    raise UserCodeError(
        f"{path} must define handler(data, context) or both input_handler(data, context) "
        f"and output_handler(response, context){stream_form}"
    )


def load_user_code(code_dir: str | None, work_dir: str) -> UserCode | None:
    """The ``/invocations`` handlers of ``code_dir/inference.py`` (import paths set first), or
    None (no script, or one that defines only ``stream_handler``)."""
    user_code = load_any_handlers(code_dir, work_dir)
    if user_code is None:
        return None
    if user_code.serves_requests and not may_serve_invocations(user_code.path):
        # nginx sends /invocations past the service for such a script: say so, do not serve.
        raise UserCodeError(
            f"{user_code.path} defines its /invocations handlers in a way the supervisor could "
            "not read without running it; define handler (or input_handler and "
            "output_handler) with def, class, = or import at the script's top level"
        )
    if not user_code.serves_requests:
        logger.info("%s has only stream_handler: /invocations serves without it", user_code.path)
        return None
    style = "handler" if user_code.handler else "input_handler/output_handler"
    logger.info("loaded %s (%s)", user_code.path, style)
    return user_code


def load_any_handlers(code_dir: str | None, work_dir: str) -> UserCode | None:
    """Every handler of ``code_dir/inference.py`` (import paths set first), or None without
    a script; the script may define only ``stream_handler``."""
    path = script_path(code_dir)
    if path is None:
        return None
    add_import_paths(code_dir, work_dir)
    return load_script(path, allow_stream_only=True)
