"""``sagemaker-tfs serve``'s arguments."""

from __future__ import annotations

import pytest
from sagemaker_tfs.supervisor.main import parse_args


def test_parse_args() -> None:
    args = parse_args(["--model-dir", "/m", "--work-dir", "/w", "--port", "81"])
    assert (args.model_dir, args.work_dir, args.port) == ("/m", "/w", 81)
    with pytest.raises(SystemExit):
        parse_args(["--port", "eighty"])
