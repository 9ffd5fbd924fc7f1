"""Which parts of sagemaker_tfs may import which: one place for the package's import rules.

The package is laid out by the process that runs it (supervisor/, service/, model_server/)
plus wire/ and client.py, shared by them. The rules on package imports are read from the
source (every ``import`` statement, lazy ones included); the rules on third-party libraries
are checked by importing in a fresh interpreter and looking at ``sys.modules``.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE_ROOT = Path(__file__).resolve().parents[2] / "container" / "sagemaker_tfs"
TENSORFLOW = ("tensorflow", "tensorflow_serving", "keras")


def imported_modules(path: Path) -> set[str]:
    """The absolute module names a source file imports (relative imports resolved)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = ".".join(("sagemaker_tfs", *path.relative_to(PACKAGE_ROOT).parent.parts))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def forbidden_imports(part: str, forbidden: tuple[str, ...]) -> dict[str, list[str]]:
    """Modules of ``sagemaker_tfs.<part>`` (a folder or a module) importing a forbidden part."""
    root = PACKAGE_ROOT / part
    files = sorted(root.rglob("*.py")) if root.is_dir() else [root.with_suffix(".py")]
    prefixes = tuple(f"sagemaker_tfs.{name}" for name in forbidden)
    found = {}
    for path in files:
        bad = sorted(
            name
            for name in imported_modules(path)
            if any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes)
        )
        if bad:
            found[str(path.relative_to(PACKAGE_ROOT))] = bad
    return found


@pytest.mark.parametrize(
    ("part", "forbidden"),
    [
        ("supervisor", ("service", "model_server", "transform")),
        ("service", ("supervisor", "model_server", "transform")),
        ("model_server", ("service", "supervisor", "transform")),
        ("transform", ("service", "supervisor", "model_server")),
        ("wire", ("service", "supervisor", "model_server", "transform", "client")),
        ("client", ("service", "supervisor", "model_server", "transform")),
        ("container_limits", ("service", "supervisor", "model_server", "transform", "client")),
        ("ports", ("service", "supervisor", "model_server", "transform", "client")),
    ],
)
def test_package_boundaries(part: str, forbidden: tuple[str, ...]) -> None:
    assert forbidden_imports(part, forbidden) == {}


def test_the_import_reader_sees_what_a_module_imports() -> None:
    source = PACKAGE_ROOT / "service" / "fast_path.py"
    assert "sagemaker_tfs.client" in imported_modules(source)
    assert "sagemaker_tfs.wire.errors.HttpError" in imported_modules(source)


def loaded_after_import(modules: list[str], roots: tuple[str, ...]) -> list[str]:
    """The modules under ``roots`` that importing ``modules`` loads, in a fresh interpreter."""
    code = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {roots!r})))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_client_loads_neither_pillow_nor_orjson_nor_tensorflow() -> None:
    """Users import the client in their ``inference.py``: it costs them gRPC and NumPy only."""
    assert loaded_after_import(["sagemaker_tfs.client"], ("PIL", "orjson", *TENSORFLOW)) == []


def test_the_service_does_not_load_tensorflow() -> None:
    """The service runs in the image's slim venv, which has no TensorFlow."""
    service = sorted(
        f"sagemaker_tfs.service.{path.stem}"
        for path in (PACKAGE_ROOT / "service").glob("*.py")
        if path.stem != "__init__"
    )
    assert loaded_after_import(service, TENSORFLOW) == []
