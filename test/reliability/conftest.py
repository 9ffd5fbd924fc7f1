"""Reliability suite: real whole stacks (nginx, gunicorn, model servers) under faults and load.

Bounded by default (a few kills of each kind, a short load run: a few minutes in CI); the
full figures with ``SAGEMAKER_TFS_RELIABILITY=long`` (100 kills of each kind, 64 clients for
10 minutes). Every test prints figure lines (``faults: ...``, ``load: ...``), collected here
and repeated at the end of the run, so they can be read from CI's log.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration" / "stack"))

from reliability_support import (  # noqa: E402
    BUDGET,
    FIGURES,
    INFERENCE_SCRIPT,
    Budget,
    Stacks,
)


@pytest.fixture(scope="session")
def budget() -> Budget:
    return BUDGET


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    if FIGURES:
        terminalreporter.section("reliability figures")
        for line in FIGURES:
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def plain_models(resources_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """half_plus_three and no inference.py: JSON goes through njs, NumPy through the fast path."""
    root = tmp_path_factory.mktemp("plain-models")
    shutil.copytree(resources_dir / "models" / "half_plus_three", root / "half_plus_three")
    return root


@pytest.fixture(scope="session")
def scripted_models(resources_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """half_plus_three with a code/inference.py calling the model server over REST or gRPC."""
    root = tmp_path_factory.mktemp("scripted-models")
    shutil.copytree(resources_dir / "models" / "half_plus_three", root / "half_plus_three")
    (root / "code").mkdir()
    (root / "code" / "inference.py").write_text(INFERENCE_SCRIPT)
    return root


@pytest.fixture
def stacks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stacks]:
    started = Stacks(tmp_path_factory)
    yield started
    started.stop_all()
