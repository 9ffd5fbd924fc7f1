"""Whether a model server's models are AVAILABLE, asked over TF Serving's REST status call:
the start-up waits and the readiness checks of the model server processes."""

from __future__ import annotations

import json
import logging
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence

from sagemaker_tfs.ports import Instance
from sagemaker_tfs.supervisor.multi_model.registry import ModelLoadError
from sagemaker_tfs.supervisor.processes.startup import poll_until

logger = logging.getLogger(__name__)
POLL_SECONDS = 0.2


def model_version_statuses(rest_port: int, name: str, timeout: float = 2.0) -> list[dict]:
    """``model_version_status`` of TF Serving's REST status call; empty when unanswered."""
    url = f"http://127.0.0.1:{rest_port}/v1/models/{urllib.parse.quote(name, safe='')}"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            status = json.load(response)
    except (OSError, ValueError):
        return []
    versions = status.get("model_version_status", []) if isinstance(status, dict) else []
    return [v for v in versions if isinstance(v, dict)]


def model_is_available(rest_port: int, name: str) -> bool:
    """True when a version of ``name`` is AVAILABLE; raises ModelLoadError if all failed."""
    versions = model_version_statuses(rest_port, name)
    if any(v.get("state") == "AVAILABLE" for v in versions):
        return True
    errors = [
        str(v.get("status", {}).get("error_message") or v.get("status", {}).get("error_code"))
        for v in versions
        if v.get("state") == "END" and v.get("status", {}).get("error_code", "OK") != "OK"
    ]
    if versions and len(errors) == len(versions):
        raise ModelLoadError(f"model {name} failed to load: {'; '.join(errors)}")
    return False


def wait_until_available(
    rest_port: int,
    names: Sequence[str],
    timeout: float,
    still_running: Callable[[], bool],
) -> bool:
    """Poll until every model in ``names`` is AVAILABLE; False on timeout or process exit.

    Raises ModelLoadError as soon as the model server reports a model as failed, rather
    than waiting for the timeout.
    """
    pending = list(names)

    def all_available() -> bool:
        pending[:] = [name for name in pending if not model_is_available(rest_port, name)]
        return not pending

    return poll_until(all_available, timeout, POLL_SECONDS, still_running)


def models_available_check(
    key: str, instance: Instance, names: Sequence[str]
) -> Callable[[], bool]:
    """A model server's readiness check: every model AVAILABLE (a failed load logged once)."""
    reported: set[str] = set()

    def check() -> bool:
        try:
            return all(model_is_available(instance.rest_port, name) for name in names)
        except ModelLoadError as error:
            if str(error) not in reported:
                reported.add(str(error))
                logger.error("%s: %s", key, error)
            return False

    return check
