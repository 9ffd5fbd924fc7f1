"""test/perf/stage_marks/sitecustomize.py wraps product functions by name: each must still
exist, or stage_times.py would silently lose its marks (read from the sources: importing the
model server's modules would import TensorFlow)."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
HOOKS_FILE = REPO_ROOT / "test" / "perf" / "stage_marks" / "sitecustomize.py"


def hooks() -> dict[str, dict[str, tuple]]:
    spec = importlib.util.spec_from_file_location("stage_marks_sitecustomize", HOOKS_FILE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # without STAGE_TIMES_DIR it only defines HOOKS
    return module.HOOKS


def defined(module: str, qualname: str) -> bool:
    path = REPO_ROOT / "container" / (module.replace(".", "/") + ".py")
    scope: list[ast.stmt] = ast.parse(path.read_text()).body
    for name in qualname.split("."):
        found = [
            node
            for node in scope
            if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name == name
        ]
        if not found:
            return False
        scope = found[0].body
    return True


@pytest.mark.parametrize(
    ("module", "qualname"),
    [(module, qualname) for module, names in hooks().items() for qualname in names],
)
def test_every_hooked_function_exists(module: str, qualname: str) -> None:
    assert defined(module, qualname), f"{module}.{qualname} is gone: update stage_marks"


def test_the_hooks_mark_every_stage_stage_times_reads() -> None:
    source = (HOOKS_FILE.parents[1] / "stage_times.py").read_text()
    stages = ast.literal_eval(source.split("STAGES = ", 1)[1].split("\n)\n", 1)[0] + "\n)")
    marks = {
        ("model_server" if module.startswith("sagemaker_tfs.model_server") else "service")
        + f".{mark}"
        for module, names in hooks().items()
        for entry, exit_, _ in names.values()
        for mark in (entry, exit_)
        if mark
    }
    for _, start, end in stages:
        for point in (start, end):
            assert point.startswith("client.") or point in marks, point
