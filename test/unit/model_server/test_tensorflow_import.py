"""The model server imports TensorFlow without Keras (``main.import_tensorflow_quietly``):
TensorFlow's ``__init__`` would import it, and a model server never uses it. Each case runs
in a process of its own, since marking a package absent lasts for the process."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # each case imports TensorFlow

REPORT = """
import json, sys
{before}
from sagemaker_tfs.model_server import main
main.import_tensorflow_quietly()
import tensorflow as tf
print(json.dumps({{
    "keras": sorted(n for n, m in sys.modules.items() if n.split(".")[0] == "keras" and m),
    "sum": float(tf.reduce_sum(tf.constant([1.0, 2.5]))),
}}))
"""


def imported_after(before: str = "") -> dict:
    process = subprocess.run(
        [sys.executable, "-c", REPORT.format(before=before)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert process.returncode == 0, process.stderr[-2000:]
    return json.loads(process.stdout.strip().splitlines()[-1])


def test_tensorflow_works_and_keras_is_not_imported() -> None:
    assert importlib.util.find_spec("keras") is not None, "Keras is installed beside TensorFlow"
    report = imported_after()
    assert report["sum"] == 3.5
    assert report["keras"] == []


def test_a_process_that_imported_keras_keeps_it() -> None:
    """A stand-in that imported Keras before the model server's import (the test stand-ins
    import model-server modules first) still has it whole."""
    report = imported_after(before="import keras")
    assert "keras" in report["keras"] and "keras.src.optimizers" in report["keras"]
    assert report["sum"] == 3.5
