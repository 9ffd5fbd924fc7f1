"""The model server's layers (docs/DESIGN.md): the core (``serving/``) imports neither front
end (``rest/``, ``grpc/``), and neither front end imports the other."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

MODEL_SERVER = Path(__file__).resolve().parents[3] / "container" / "sagemaker_tfs" / "model_server"
PREFIX = "sagemaker_tfs.model_server."


def imported(path: Path) -> set[str]:
    """The absolute module names a source file imports, lazy imports included."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize(
    ("layer", "forbidden"),
    [("serving", ("rest", "grpc")), ("rest", ("grpc",)), ("grpc", ("rest",))],
)
def test_a_layer_imports_no_layer_above_or_beside_it(
    layer: str, forbidden: tuple[str, ...]
) -> None:
    files = sorted((MODEL_SERVER / layer).glob("*.py"))
    assert len(files) > 2
    bad = {
        path.name: sorted(
            name
            for name in imported(path)
            if any(
                name == PREFIX + part or name.startswith(f"{PREFIX}{part}.") for part in forbidden
            )
        )
        for path in files
    }
    assert {name: found for name, found in bad.items() if found} == {}


def test_the_check_sees_a_front_end_import() -> None:
    assert PREFIX + "serving.manager" in imported(MODEL_SERVER / "grpc" / "servicers.py")
