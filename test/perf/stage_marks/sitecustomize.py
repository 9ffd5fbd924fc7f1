"""Per-request stage timestamps in the stack's own processes, for test/perf/stage_times.py.

Not part of the product: stage_times.py puts this directory on the stack's PYTHONPATH, so
every Python process of the stack imports this file at start-up; with ``STAGE_TIMES_DIR`` set
it wraps the functions named in ``HOOKS`` as their modules are imported (before anything can
take a reference to them), marking CLOCK_MONOTONIC times (``time.perf_counter``, shared by a
machine's processes) when they are entered and when they return. The wrapper that ends a
request writes one line of ``mark=seconds`` pairs to ``$STAGE_TIMES_DIR/<role>.log``.
test/unit/test_stage_marks.py checks that every hooked function still exists.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import os
import sys
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

# module -> {qualified name: (mark on entry, mark on return, role whose line is then written)}
HOOKS: dict[str, dict[str, tuple[str | None, str | None, str | None]]] = {
    "sagemaker_tfs.service.edge.app": {
        "Invocations.on_post": ("handler_start", "answer_handed_to_gunicorn", "service"),
    },
    "sagemaker_tfs.service.routing.fast_path": {"check": ("fast_path_start", None, None)},
    "sagemaker_tfs.service.codecs.registry": {
        "decode_request": (None, "decoded", None),
        "encode_answer": ("answer_decoded", "answer_encoded", None),
    },
    "sagemaker_tfs.wire.predict_messages": {
        "encode_predict_request": (None, "request_encoded", None),
        "decode_predict_response": ("answer_received", None, None),
    },
    "sagemaker_tfs.model_server.grpc.servicers": {
        "PredictionService.Predict": ("server_entry", "server_exit", "model_server"),
    },
    "sagemaker_tfs.model_server.serving.saved_model_servable": {
        "SavedModelServable.predict": ("session_start", "session_end", None),
    },
}
_marks: dict[str, float] = {}


def _write(role: str) -> None:
    line = " ".join(f"{stage}={at:.6f}" for stage, at in _marks.items())
    _marks.clear()
    with open(os.path.join(os.environ["STAGE_TIMES_DIR"], f"{role}.log"), "a") as log:
        log.write(line + "\n")


def _wrapped(
    function: Callable[..., Any], entry: str | None, exit_: str | None, role: str | None
) -> Callable[..., Any]:
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if entry:
            _marks[entry] = time.perf_counter()
        result = function(*args, **kwargs)
        if exit_:
            _marks[exit_] = time.perf_counter()
        if role:
            _write(role)
        return result

    return wrapper


def _attach(module: ModuleType) -> None:
    for qualname, hook in HOOKS[module.__name__].items():
        owner: Any = module
        *path, name = qualname.split(".")
        for part in path:
            owner = getattr(owner, part)
        setattr(owner, name, _wrapped(getattr(owner, name), *hook))


class _HookingFinder(importlib.abc.MetaPathFinder):
    """Finds the hooked modules as usual and wraps their functions once they are loaded."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in HOOKS:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        load = spec.loader.exec_module

        def exec_module(module: ModuleType) -> None:
            load(module)
            _attach(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


if os.environ.get("STAGE_TIMES_DIR"):
    sys.meta_path.insert(0, _HookingFinder())
