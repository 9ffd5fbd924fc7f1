"""Multi-model endpoints keep each model's code to itself (issue 29): two models that each ship a
``utils.py`` and a ``code/lib`` package of the same name answer with their own, whatever the
order they were loaded and called in; an unloaded model's modules leave the worker."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from whole_stack import RunningStack, running_stack

pytestmark = pytest.mark.timeout(300)

REPO_ROOT = Path(__file__).resolve().parents[3]
HALF_PLUS_THREE = REPO_ROOT / "test" / "resources" / "models" / "half_plus_three"

INFERENCE = """
import json
import sys

import requests
import utils
from mylib import version


def handler(data, context):
    answer = requests.post(context.rest_uri, data=data.read(), timeout=30).json()
    files = sorted(
        module.__file__ for module in list(sys.modules.values())
        if "/code/" in (getattr(module, "__file__", None) or "")
    )
    body = {"utils": utils.NAME, "lib": version(), "answer": answer, "code_files": files}
    return json.dumps(body), "application/json"
"""


def model_with_code(root: Path, name: str) -> Path:
    """half_plus_three with a code/ of its own: utils.py and code/lib/mylib (which imports
    itself by its plain name), both saying which model they belong to."""
    model = root / name
    shutil.copytree(HALF_PLUS_THREE, model)
    code = model / "code"
    (code / "lib" / "mylib").mkdir(parents=True)
    (code / "inference.py").write_text(INFERENCE)
    (code / "utils.py").write_text(f"NAME = 'utils of {name}'\n")
    (code / "lib" / "mylib" / "__init__.py").write_text(
        "from mylib.core import VERSION\n\n\ndef version():\n    return VERSION\n"
    )
    (code / "lib" / "mylib" / "core.py").write_text(f"VERSION = 'mylib of {name}'\n")
    return model


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    root = tmp_path_factory.mktemp("mme_code") / "models"
    for name in ("first", "second"):
        model_with_code(root, name)
    work_dir = root.parent / "work"
    work_dir.mkdir()
    with running_stack(root, work_dir, multi_model=True) as running:  # one worker
        yield running


def load(stack: RunningStack, name: str) -> None:
    response = requests.post(
        stack.url + "/models", json={"model_name": name, "url": name}, timeout=180
    )
    assert response.status_code == 200, response.text


def invoke(stack: RunningStack, name: str) -> dict:
    response = stack.post('{"instances": [1.0]}', path=f"/models/{name}/invoke")
    assert response.status_code == 200, response.text
    return response.json()


def test_each_model_answers_with_its_own_modules(stack: RunningStack) -> None:
    load(stack, "first")
    load(stack, "second")
    for name in ("first", "second", "first", "second"):
        answer = invoke(stack, name)
        assert (answer["utils"], answer["lib"]) == (f"utils of {name}", f"mylib of {name}")
        assert answer["answer"] == {"predictions": [3.5]}

    assert requests.delete(stack.url + "/models/second", timeout=60).status_code == 200
    time.sleep(1.2)  # the worker asks the registry again after a second
    files = invoke(stack, "first")["code_files"]
    assert any("/first/code/" in path for path in files)
    assert not [path for path in files if "/second/code/" in path]  # its modules are gone
