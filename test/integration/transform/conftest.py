"""Fixtures for the transform driver's tests: the scripted endpoint (``scripted_endpoint.py``)
and the whole-stack helpers of ``test/integration/stack/whole_stack.py``."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "stack"))  # whole_stack

from scripted_endpoint import ScriptedEndpoint, scripted_endpoint  # noqa: E402


@pytest.fixture
def endpoint() -> Iterator[ScriptedEndpoint]:
    with scripted_endpoint() as server:
        yield server
