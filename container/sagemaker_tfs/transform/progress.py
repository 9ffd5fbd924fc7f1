"""Progress of a job: a tqdm bar on a terminal, plain log lines otherwise, and the summary.

The bar counts input bytes (with records, records/s and failures beside it) and shows the
ETA when the total is known (every input's size is known and it is not compressed). Without
a terminal a line is logged every ``LOG_INTERVAL_SECONDS``.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)

LOG_INTERVAL_SECONDS = 10.0


@dataclass
class Summary:
    files: int = 0
    files_done: int = 0
    records: int = 0
    requests: int = 0
    retries: int = 0
    input_bytes: int = 0
    output_bytes: int = 0
    failures: int = 0
    seconds: float = 0.0

    def line(self) -> str:
        rate = self.records / self.seconds if self.seconds > 0 else 0.0
        mib = self.input_bytes / (1 << 20)
        return (
            f"{self.files_done}/{self.files} files, {self.records} records in {self.requests} "
            f"requests ({self.retries} retried), {mib:.1f} MiB in, "
            f"{self.output_bytes / (1 << 20):.1f} MiB out, {self.failures} failed, "
            f"{self.seconds:.1f}s, {rate:.1f} records/s, {mib / max(self.seconds, 1e-9):.2f} MiB/s"
        )


class Progress:
    def __init__(self, mode: str, total_bytes: int | None, files: int) -> None:
        self.summary = Summary(files=files)
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._last_log = self.started
        if mode == "auto":
            mode = "bar" if sys.stderr.isatty() else "log"
        self.mode = mode
        self._bar: Any = None
        if mode == "bar":
            from tqdm import tqdm

            self._bar = tqdm(
                total=total_bytes,
                unit="B",
                unit_scale=True,
                unit_divisor=1024,
                desc="transform",
                file=sys.stderr,
                dynamic_ncols=True,
            )

    def advance(self, records: int, input_bytes: int, output_bytes: int) -> None:
        with self._lock:
            s = self.summary
            s.records += records
            s.requests += 1
            s.input_bytes += input_bytes
            s.output_bytes += output_bytes
            s.seconds = time.monotonic() - self.started
            if self._bar is not None:
                self._bar.update(input_bytes)
                rate = s.records / max(s.seconds, 1e-9)
                self._bar.set_postfix(
                    records=s.records,
                    rec_s=f"{rate:.0f}",
                    files=f"{s.files_done}/{s.files}",
                    refresh=False,
                )
            elif self.mode == "log" and time.monotonic() - self._last_log >= LOG_INTERVAL_SECONDS:
                self._last_log = time.monotonic()
                logger.info("progress: %s", s.line())

    def file_done(self) -> None:
        with self._lock:
            self.summary.files_done += 1

    def finish(self, retries: int, failed: bool) -> Summary:
        with self._lock:
            self.summary.seconds = time.monotonic() - self.started
            self.summary.retries = retries
            self.summary.failures = 1 if failed else 0
            if self._bar is not None:
                self._bar.close()
            return self.summary
