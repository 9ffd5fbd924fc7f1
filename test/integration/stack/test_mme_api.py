"""Multi-model endpoints through the whole stack: /models CRUD, invoke, Target-Model."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from whole_stack import RunningStack, running_stack

pytestmark = pytest.mark.timeout(300)

REPO_ROOT = Path(__file__).resolve().parents[3]
HALF_PLUS_THREE = REPO_ROOT / "test" / "resources" / "models" / "half_plus_three"
CODE = REPO_ROOT / "test" / "resources" / "code"


@pytest.fixture(scope="module")
def models_root(tmp_path_factory: pytest.TempPathFactory, testdata_dir: Path) -> Path:
    root = tmp_path_factory.mktemp("mme") / "models"
    shutil.copytree(HALF_PLUS_THREE, root / "half_plus_three")
    shutil.copytree(testdata_dir / "saved_model_half_plus_two_cpu", root / "half_plus_two")
    # a model with its own inference.py
    shutil.copytree(HALF_PLUS_THREE, root / "with_code")
    shutil.copytree(CODE / "io_pair", root / "with_code" / "code")
    (root / "no_versions" / "abc").mkdir(parents=True)
    return root


@pytest.fixture(scope="module")
def stack(models_root: Path) -> Iterator[RunningStack]:
    work_dir = models_root.parent / "work"
    work_dir.mkdir()
    env = {"SAGEMAKER_GUNICORN_WORKERS": "2"}  # state lives in the supervisor, not a worker
    with running_stack(models_root, work_dir, env, multi_model=True) as running:
        yield running


def load(stack: RunningStack, name: str, url: str) -> requests.Response:
    return requests.post(stack.url + "/models", json={"model_name": name, "url": url}, timeout=180)


def invoke(stack: RunningStack, name: str, body: str, content_type: str = "application/json"):
    return stack.post(body, content_type, path=f"/models/{name}/invoke")


def test_ping_without_models(stack: RunningStack) -> None:
    assert stack.get("/ping").status_code == 200


def test_two_models_load_invoke_unload(stack: RunningStack, models_root: Path) -> None:
    response = load(stack, "hp3", str(models_root / "half_plus_three"))
    assert response.status_code == 200, response.text
    assert "Successfully loaded model hp3" in response.text
    assert load(stack, "hp2", "half_plus_two").status_code == 200
    listed = stack.get("/models").json()
    assert {"hp2", "hp3"} <= {m["modelName"] for m in listed["models"]}
    assert stack.get("/models/hp3").status_code == 200

    assert invoke(stack, "hp3", "[1.0, 2.0]").json() == {"predictions": [[3.5, 4.0]]}
    assert invoke(stack, "hp2", '{"instances": [2.0]}').json() == {"predictions": [3.0]}
    csv = invoke(stack, "hp2", "1.0\n2.0", "text/csv")
    assert csv.json() == {"predictions": [2.5, 3.0]}
    target = stack.post("[2.0]", **{"X-Amzn-SageMaker-Target-Model": "hp3"})
    assert target.json() == {"predictions": [[4.0]]}

    second = load(stack, "hp3", "half_plus_three")
    assert second.status_code == 409
    assert "Model hp3 is already loaded" in second.text

    assert requests.delete(stack.url + "/models/hp3", timeout=60).status_code == 200
    gone = invoke(stack, "hp3", "[1.0]")
    assert gone.status_code == 404
    assert gone.json() == {"error": "Model hp3 is not loaded yet."}
    assert stack.get("/models/hp3").status_code == 404
    assert requests.delete(stack.url + "/models/hp3", timeout=60).status_code == 404
    assert invoke(stack, "hp2", "[2.0]").json() == {"predictions": [[3.0]]}
    assert requests.delete(stack.url + "/models/hp2", timeout=60).status_code == 200


def test_list_and_describe_answer_sagemakers_shapes_with_paging(stack: RunningStack) -> None:
    """``GET /models`` is ``{"models": [{"modelName", "modelUrl"}], "nextPageToken"}``, paged
    with ``next_page_token`` (and ``limit``); ``GET /models/NAME`` is ``{"modelName",
    "modelUrl"}``. The stack's own view (ports) is not reachable through nginx."""
    for name in ("page_a", "page_b"):
        assert load(stack, name, "half_plus_three").status_code == 200
    try:
        described = stack.get("/models/page_a")
        assert described.status_code == 200
        assert described.json() == {"modelName": "page_a", "modelUrl": "half_plus_three"}
        pages, token = [], None
        while True:
            query = "?limit=1" + (f"&next_page_token={token}" if token else "")
            page = stack.get("/models" + query).json()
            assert set(page) == {"models", "nextPageToken"} and len(page["models"]) <= 1
            pages.append(page["models"])
            token = page["nextPageToken"]
            if token is None:
                break
        listed = [model for page in pages for model in page]
        assert {"modelName": "page_b", "modelUrl": "half_plus_three"} in listed
        names = [model["modelName"] for model in listed]
        assert names == sorted(set(names)) and len(pages) == len(names)
        assert stack.get("/models").json()["models"] == listed  # one page of 100 by default
        assert stack.get("/models?limit=0").status_code == 400
        assert stack.get("/registry/page_a").status_code == 404
    finally:
        for name in ("page_a", "page_b"):
            requests.delete(f"{stack.url}/models/{name}", timeout=60)


def test_per_model_inference_script(stack: RunningStack) -> None:
    assert load(stack, "coded", "with_code").status_code == 200
    response = invoke(stack, "coded", "1.0,2.0", "text/csv")
    assert response.status_code == 200, response.text
    assert response.json() == {
        "predictions": [3.5, 4.0],
        "handler": "io_pair",
        "model": "coded",
    }
    assert requests.delete(stack.url + "/models/coded", timeout=60).status_code == 200


def test_unknown_model(stack: RunningStack) -> None:
    response = invoke(stack, "never_loaded", "[1.0]")
    assert response.status_code == 404
    assert response.json() == {"error": "Model never_loaded is not loaded yet."}
    response = stack.post("[1.0]", **{"X-Amzn-SageMaker-Target-Model": "never_loaded"})
    assert response.status_code == 404


@pytest.mark.parametrize(
    ("body", "status", "text"),
    [
        ({"model_name": "bad", "url": "no_versions"}, 404, "Could not find valid base path"),
        ({"model_name": "bad", "url": "does_not_exist"}, 404, "Could not find valid base path"),
        ({"model_name": "bad", "url": "../../../../etc"}, 403, "outside"),
        ({"model_name": "bad", "url": "/etc"}, 403, "outside"),
        ({"model_name": "bad\nname", "url": "half_plus_three"}, 400, "model_name"),
        ({"model_name": 'x" }', "url": "half_plus_three"}, 400, "model_name"),
        ({"url": "half_plus_three"}, 400, "model_name"),
        ({"model_name": "bad"}, 400, "url"),
    ],
)
def test_bad_load_requests(stack: RunningStack, body: dict, status: int, text: str) -> None:
    response = requests.post(stack.url + "/models", json=body, timeout=60)
    assert response.status_code == status, response.text
    assert text in response.json()["error"]
    assert stack.get("/ping").status_code == 200


def test_malformed_load_body(stack: RunningStack) -> None:
    response = requests.post(
        stack.url + "/models", data="{not json", headers={"Content-Type": "application/json"},
        timeout=60,
    )  # fmt: skip
    assert response.status_code == 400
    assert "error" in json.loads(response.text)


def test_invocations_without_target_model_is_400(stack: RunningStack) -> None:
    response = stack.post("[1.0]")
    assert response.status_code == 400
    assert "X-Amzn-SageMaker-Target-Model" in response.json()["error"]


def test_shared_inference_script(tmp_path: Path) -> None:
    """A model without code/ uses <models root>/code/inference.py; its own code/ still wins."""
    root = tmp_path / "models"
    shutil.copytree(HALF_PLUS_THREE, root / "plain")
    shutil.copytree(HALF_PLUS_THREE, root / "with_code")
    shutil.copytree(CODE / "io_pair", root / "with_code" / "code")
    shutil.copytree(CODE / "rest_handler", root / "code")
    work_dir = tmp_path / "work"
    work_dir.mkdir()
    with running_stack(root, work_dir, multi_model=True) as stack:
        assert load(stack, "plain", "plain").status_code == 200
        assert load(stack, "coded", "with_code").status_code == 200
        shared = invoke(stack, "plain", '{"instances": [1.0]}')
        assert shared.status_code == 200, shared.text
        assert shared.json()["predictions"] == [3.5]
        assert shared.json()["context"]["model_name"] == "plain"
        own = invoke(stack, "coded", "1.0", "text/csv")
        assert own.json()["handler"] == "io_pair"


def test_reload_then_invoke_at_once(stack: RunningStack) -> None:
    """Workers cache lookups for a second: a reloaded model must still answer at once."""
    assert load(stack, "again", "half_plus_three").status_code == 200
    for _ in range(4):  # warm both workers' caches
        assert invoke(stack, "again", "[1.0]").status_code == 200
    assert requests.delete(stack.url + "/models/again", timeout=60).status_code == 200
    assert load(stack, "again", "half_plus_two").status_code == 200
    for _ in range(4):
        response = invoke(stack, "again", "[2.0]")
        assert response.status_code == 200, response.text
        assert response.json() == {"predictions": [[3.0]]}
    assert requests.delete(stack.url + "/models/again", timeout=60).status_code == 200


def test_unload_then_invoke_with_user_code_is_404(stack: RunningStack) -> None:
    assert load(stack, "coded2", "with_code").status_code == 200
    for _ in range(4):
        assert invoke(stack, "coded2", "1.0", "text/csv").status_code == 200
    assert requests.delete(stack.url + "/models/coded2", timeout=60).status_code == 200
    for _ in range(4):
        response = invoke(stack, "coded2", "1.0", "text/csv")
        assert response.status_code == 404, response.text
        assert response.json() == {"error": "Model coded2 is not loaded yet."}
