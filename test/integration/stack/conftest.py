"""The ``start_stack`` fixture: a fresh whole stack per test (see ``whole_stack.py``)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from whole_stack import Stack, StackError, StartStack, launch


@pytest.fixture
def start_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartStack]:
    """Factory: ``start_stack(model_dir, env=None, multi_model=False, wait=True, ...)``."""
    stacks: list[Stack] = []

    def start(
        model_dir: str | os.PathLike[str],
        env: dict[str, str] | None = None,
        multi_model: bool = False,
        wait: bool = True,
        port_range_size: int = 20,
        port: int | None = None,
        affinity: set[int] | None = None,
    ) -> Stack:
        work_dir = tmp_path_factory.mktemp("stack")
        stack = launch(model_dir, work_dir, env, multi_model, port_range_size, port, affinity)
        stacks.append(stack)
        if wait:
            stack.wait_for_ping()
        return stack

    yield start
    for stack in stacks:
        try:
            stack.stop()
        except StackError as error:
            pytest.fail(str(error))
        finally:
            stack.kill_session()
