"""Files that a reader may open at any moment (a model server's config, ``/ping``'s verdict)."""

from __future__ import annotations

import os
import threading
from pathlib import Path


def write_atomically(path: str, text: str) -> None:
    """A reader sees the old file or the new one, never half of one."""
    partial = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    Path(partial).write_text(text, encoding="utf-8")
    os.replace(partial, path)
