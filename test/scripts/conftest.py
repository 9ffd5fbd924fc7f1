"""Fixtures for the image script tests (see script_helpers for the stand-in commands)."""

from __future__ import annotations

from pathlib import Path

import pytest
from script_helpers import ScriptRunner, make_runner


@pytest.fixture
def run_script(tmp_path: Path) -> ScriptRunner:
    """Runs scripts/NAME from a temporary repository copy, stand-in docker/aws first on PATH."""
    return make_runner(tmp_path)
