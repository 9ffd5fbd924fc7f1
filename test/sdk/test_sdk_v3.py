"""SDK v3 against the host stack, as far as its current release can call a local endpoint:
its serializers and deserializers over its local-mode runtime client (``sdk_v3_client.py``).
v3 cannot share a virtualenv with v2 (both are the ``sagemaker`` package), so it has one of
its own (``sdk_v3_python`` in ``test/conftest.py``)."""

from __future__ import annotations

from pathlib import Path

from sdk_offline import sdk_client_answers
from whole_stack import RunningStack

CLIENT = Path(__file__).resolve().parent / "sdk_v3_client.py"


def test_v3_serializers_over_the_local_runtime_client(
    stack: RunningStack, sdk_v3_python: Path, tmp_path: Path
) -> None:
    answers = sdk_client_answers(sdk_v3_python, CLIENT, str(stack.port), scratch=tmp_path)
    assert answers == {
        "json": {"predictions": [4.5, 5.0]},
        "csv": {"predictions": [[4.5, 5.0]]},
        "jsonlines": {"predictions": [[4.5, 5.0], [6.5, 7.0]]},
        "csv_out": [["4.5", "5"]],  # one instance, as with a JSON answer: one row
        "npy": [4.5, 5.0, 6.5],
        "npy_shapeless": [[3.5], [4.0], [5.5]],
        "version": {"predictions": [[4.5]]},
        "regress": {"results": [2.5]},
        "error": {"error": "Invalid .npy payload: it does not start with the .npy magic"},
    }
