"""SAGEMAKER_MULTI_MODEL_UNIVERSAL_BUCKET / _PREFIX through the whole stack.

AWS cannot be reached here, so S3 itself is the one stand-in: moto's S3 server
(``test/s3_server.py``) on a free local port. The stack's real boto3 talks to it over a
socket through ``AWS_ENDPOINT_URL_S3``, with dummy credentials; everything else
(supervisor, gunicorn, nginx, model servers) is real.
"""

from __future__ import annotations

import shutil
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from s3_server import S3Server, s3_server
from whole_stack import StackError, launch, running_stack

pytestmark = pytest.mark.timeout(300)

REPO_ROOT = Path(__file__).resolve().parents[3]
HALF_PLUS_THREE = REPO_ROOT / "test" / "resources" / "models" / "half_plus_three"
LIST_PAGE_KEYS = 1000  # ListObjectsV2's page size: more keys than this need a second page

SHARED_INFERENCE = '''\
"""Shared handler downloaded from S3: tags the answer with a value from lib/."""
import json

import requests
from shared_tools.tag import TAG


def handler(data, context):
    response = requests.post(context.rest_uri, data=data.read(), timeout=30)
    body = response.json()
    body["tag"] = TAG
    body["model_name"] = context.model_name
    return json.dumps(body), "application/json"
'''


@pytest.fixture
def local_s3(tmp_path: Path) -> Iterator[S3Server]:
    with s3_server(tmp_path) as server:
        yield server


def s3_env(server: S3Server, bucket: str, prefix: str) -> dict[str, str]:
    return {
        "SAGEMAKER_MULTI_MODEL_UNIVERSAL_BUCKET": bucket,
        "SAGEMAKER_MULTI_MODEL_UNIVERSAL_PREFIX": prefix,
        **server.env,
    }


def put_shared_code(
    server: S3Server, tree: Path, bucket: str, prefix: str, fillers: int = 0
) -> None:
    """The shared code (and ``fillers`` more small files under ``data/``) under the prefix,
    plus a decoy outside it."""
    code = tree / "code"
    (code / "lib" / "shared_tools").mkdir(parents=True)
    (code / "inference.py").write_text(SHARED_INFERENCE)
    (code / "lib" / "shared_tools" / "__init__.py").write_text("")
    (code / "lib" / "shared_tools" / "tag.py").write_text('TAG = "from-s3"\n')
    # Would need PyPI if installed: lib/ exists, so (as documented) it is not.
    (code / "requirements.txt").write_text("package-that-does-not-exist-h8==1.0\n")
    if fillers:
        (code / "data").mkdir()
        for index in range(fillers):
            (code / "data" / f"{index:05d}.txt").write_text(str(index))
    (tree / "other").mkdir()
    (tree / "other" / "inference.py").write_text("raise RuntimeError('wrong')\n")
    server.put_tree(bucket, prefix.rstrip("/") + "/", code)
    server.put_tree(bucket, "other/", tree / "other")


def test_downloaded_inference_script_handles_invoke(local_s3: S3Server, tmp_path: Path) -> None:
    fillers = LIST_PAGE_KEYS - 3  # with the 4 code files: two ListObjectsV2 pages
    put_shared_code(local_s3, tmp_path / "tree", "bucket", "shared/code", fillers)
    models = tmp_path / "models"
    shutil.copytree(HALF_PLUS_THREE, models / "half_plus_three")
    work_dir = tmp_path / "work"
    work_dir.mkdir()
    env = s3_env(local_s3, "bucket", "shared/code")
    with running_stack(models, work_dir, env, multi_model=True) as stack:
        downloaded = work_dir / "universal_code"
        assert (downloaded / "lib" / "shared_tools" / "tag.py").is_file()
        assert (downloaded / "data" / f"{fillers - 1:05d}.txt").is_file()  # the second page
        assert not (downloaded / "other").exists()
        assert f"downloaded {fillers + 4} files" in stack.log_text()
        assert "s3://bucket/shared/code/" in stack.log_text()
        load = requests.post(
            stack.url + "/models",
            json={"model_name": "hp3", "url": "half_plus_three"},
            timeout=180,
        )
        assert load.status_code == 200, load.text
        answer = stack.post('{"instances": [1.0, 2.0]}', path="/models/hp3/invoke")
        assert answer.status_code == 200, answer.text
        assert answer.json() == {
            "predictions": [3.5, 4.0],
            "tag": "from-s3",
            "model_name": "hp3",
        }
    assert not (models / "code").exists()  # nothing written under the (read-only) models


def write_wheel(path: Path, module: str, source: str) -> None:
    """The smallest wheel pip installs offline: one module, no dependencies."""
    dist_info = f"{module}-1.0.dist-info"
    files = {
        f"{module}.py": source,
        f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {module}\nVersion: 1.0\n",
        f"{dist_info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = "".join(f"{name},,\n" for name in files) + f"{dist_info}/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as wheel:
        for name, text in {**files, f"{dist_info}/RECORD": record}.items():
            wheel.writestr(name, text)


def test_downloaded_requirements_are_installed_before_the_service(
    local_s3: S3Server, tmp_path: Path
) -> None:
    """No lib/: the gunicorn hook pip-installs the downloaded requirements.txt (a wheel that
    came from S3 too, so pip needs no index)."""
    code = tmp_path / "code"
    code.mkdir(parents=True)
    wheel = "h8_universal_tag-1.0-py3-none-any.whl"
    write_wheel(code / wheel, "h8_universal_tag", 'TAG = "from-a-wheel"\n')
    (code / "requirements.txt").write_text(f"./{wheel}\n")
    (code / "inference.py").write_text(
        SHARED_INFERENCE.replace(
            "from shared_tools.tag import TAG", "from h8_universal_tag import TAG"
        )
    )
    models = tmp_path / "models"
    shutil.copytree(HALF_PLUS_THREE, models / "half_plus_three")
    work_dir = tmp_path / "work"
    work_dir.mkdir()
    local_s3.put_tree("bucket", "code/", code)
    env = s3_env(local_s3, "bucket", "code")
    with running_stack(models, work_dir, env, multi_model=True) as stack:
        assert (work_dir / "user_packages" / "h8_universal_tag.py").is_file()
        load = requests.post(
            stack.url + "/models", json={"model_name": "m", "url": "half_plus_three"}, timeout=180
        )
        assert load.status_code == 200, load.text
        answer = stack.post('{"instances": [2.0]}', path="/models/m/invoke")
        assert answer.status_code == 200, answer.text
        assert answer.json()["tag"] == "from-a-wheel"


@pytest.mark.parametrize(
    ("bucket", "overrides", "reason"),
    [
        ("no-such-bucket", {}, "(NoSuchBucket) when calling the ListObjectsV2 operation"),
        ("bucket", {"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""}, "locate credentials"),
    ],
)
def test_failed_download_stops_start_up_with_one_line(
    local_s3: S3Server, tmp_path: Path, bucket: str, overrides: dict[str, str], reason: str
) -> None:
    put_shared_code(local_s3, tmp_path / "tree", "bucket", "shared/code")
    models = tmp_path / "models"
    models.mkdir()
    work_dir = tmp_path / "work"
    work_dir.mkdir()
    env = s3_env(local_s3, bucket, "shared/code") | overrides
    stack = launch(models, work_dir, env, multi_model=True)
    try:
        with pytest.raises(StackError, match="serve exited with 1"):
            stack.wait_for_ping(timeout=60)
    finally:
        stack.kill_session()
    failures = [line for line in stack.log_text().splitlines() if "start-up failed" in line]
    assert len(failures) == 1
    assert f"downloading s3://{bucket}/shared/code/ failed:" in failures[0]
    assert reason in failures[0]
    assert "started gunicorn" not in stack.log_text()  # stopped before the service started
