"""What the transform command's tests and its benchmark (``test/perf/bench_transform.py``) share:
a job's command line written as keywords, and the random JPEG images they send as records."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image


def job_flags(**options: object) -> list[str]:
    """The ``sagemaker-tfs transform`` flags for ``options``, in the order given:
    ``job_flags(split_type="Line", input=path)`` is ``["--split-type", "Line", "--input", "PATH"]``.
    """
    flags: list[str] = []
    for name, value in options.items():
        flags += ["--" + name.replace("_", "-"), str(value)]
    return flags


def random_jpeg(seed: int, size: int = 48) -> bytes:
    """A ``size`` x ``size`` JPEG of random pixels, the same for the same ``seed``."""
    pixels = np.random.default_rng(seed).integers(0, 255, (size, size, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()
