"""Progress: a tqdm bar when asked (a terminal), log lines otherwise, and the summary."""

from __future__ import annotations

import logging

import pytest
from sagemaker_tfs.transform import progress
from sagemaker_tfs.transform.progress import Progress


def test_the_bar_shows_bytes_records_and_rate(capsys: pytest.CaptureFixture[str]) -> None:
    bar = Progress("bar", total_bytes=4096, files=2)
    bar.advance(records=10, input_bytes=2048, output_bytes=100)
    bar.file_done()
    bar.advance(records=5, input_bytes=2048, output_bytes=50)
    summary = bar.finish(retries=1, failed=False)
    err = capsys.readouterr().err
    assert "transform: 100%" in err and "4.00k/4.00k" in err
    assert "records=15" in err and "rec_s=" in err and "files=1/2" in err
    assert (summary.records, summary.requests, summary.input_bytes, summary.retries) == (
        15,
        2,
        4096,
        1,
    )
    assert summary.line().startswith("1/2 files, 15 records in 2 requests (1 retried)")


def test_without_a_terminal_progress_is_logged(
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(progress, "LOG_INTERVAL_SECONDS", 0.0)
    caplog.set_level(logging.INFO, "sagemaker_tfs.transform")
    logged = Progress("auto", total_bytes=None, files=1)  # pytest's stderr is not a terminal
    logged.advance(records=3, input_bytes=30, output_bytes=3)
    assert logged.mode == "log"
    assert "progress: 0/1 files, 3 records in 1 requests" in caplog.text
    assert capsys.readouterr().err == ""  # no bar
