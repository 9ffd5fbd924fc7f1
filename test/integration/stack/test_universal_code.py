"""SAGEMAKER_MULTI_MODEL_UNIVERSAL_BUCKET / _PREFIX through the whole stack.

AWS cannot be reached here, so S3 itself is the one stand-in: ``LocalS3`` is a small HTTP
server that answers ListObjectsV2 (with pagination) and GetObject from a local directory
(one sub-directory per bucket). The stack's real boto3 talks to it over a socket through
``AWS_ENDPOINT_URL_S3``, with dummy credentials; everything else (supervisor, gunicorn,
nginx, model servers) is real.
"""

from __future__ import annotations

import shutil
import threading
import urllib.parse
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from xml.sax.saxutils import escape

import pytest
import requests
from whole_stack import StackError, launch, running_stack

pytestmark = pytest.mark.timeout(300)

REPO_ROOT = Path(__file__).resolve().parents[3]
HALF_PLUS_THREE = REPO_ROOT / "test" / "resources" / "models" / "half_plus_three"
PAGE_SIZE = 2  # several ListObjectsV2 pages for a handful of files

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


def _xml(name: str, value: object) -> str:
    return f"<{name}>{escape(str(value))}</{name}>"


class LocalS3Handler(BaseHTTPRequestHandler):
    """Path-style ``GET /BUCKET?list-type=2...`` and ``GET /BUCKET/KEY``."""

    server: LocalS3

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - base signature
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        url = urllib.parse.urlsplit(self.path)
        bucket, _, key = urllib.parse.unquote(url.path.lstrip("/")).partition("/")
        root = self.server.root / bucket
        if not bucket or not root.is_dir():
            self._error(404, "NoSuchBucket", "The specified bucket does not exist")
        elif key:
            self._get_object(root, key)
        else:
            self._list_objects(bucket, root, urllib.parse.parse_qs(url.query))

    def _list_objects(self, bucket: str, root: Path, query: dict[str, list[str]]) -> None:
        prefix = query.get("prefix", [""])[0]
        after = query.get("continuation-token", [""])[0]
        keys = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
        keys = [k for k in keys if k.startswith(prefix) and k > after]
        page, rest = keys[:PAGE_SIZE], keys[PAGE_SIZE:]
        url_encoded = query.get("encoding-type", [""])[0] == "url"

        def shown(key: str) -> str:
            return urllib.parse.quote(key, safe="/") if url_encoded else key

        parts = [
            '<?xml version="1.0" encoding="UTF-8"?>',
            '<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">',
            _xml("Name", bucket),
            _xml("Prefix", shown(prefix)),
            _xml("KeyCount", len(page)),
            _xml("MaxKeys", 1000),
            _xml("IsTruncated", "true" if rest else "false"),
        ]
        if url_encoded:
            parts.append(_xml("EncodingType", "url"))
        if rest:
            parts.append(_xml("NextContinuationToken", page[-1]))
        for key in page:
            size = (root / key).stat().st_size
            parts.append(f"<Contents>{_xml('Key', shown(key))}{_xml('Size', size)}</Contents>")
        parts.append("</ListBucketResult>")
        self.server.list_requests += 1
        self._send(200, "".join(parts).encode(), "application/xml")

    def _get_object(self, root: Path, key: str) -> None:
        path = root / key
        if not path.is_file():
            self._error(404, "NoSuchKey", "The specified key does not exist.")
            return
        self._send(200, path.read_bytes(), "binary/octet-stream")

    def _error(self, status: int, code: str, message: str) -> None:
        body = f"<Error>{_xml('Code', code)}{_xml('Message', message)}</Error>"
        self._send(status, body.encode(), "application/xml")

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class LocalS3(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, root: Path) -> None:
        super().__init__(("127.0.0.1", 0), LocalS3Handler)
        self.root = root
        self.list_requests = 0

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@pytest.fixture
def local_s3(tmp_path: Path) -> Iterator[LocalS3]:
    server = LocalS3(tmp_path / "s3")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def s3_env(server: LocalS3, tmp_path: Path, bucket: str, prefix: str) -> dict[str, str]:
    return {
        "SAGEMAKER_MULTI_MODEL_UNIVERSAL_BUCKET": bucket,
        "SAGEMAKER_MULTI_MODEL_UNIVERSAL_PREFIX": prefix,
        "AWS_ENDPOINT_URL_S3": server.endpoint,
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": str(tmp_path / "no-aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-aws-credentials"),
    }


def put_shared_code(s3_root: Path, bucket: str, prefix: str) -> None:
    code = s3_root / bucket / prefix
    (code / "lib" / "shared_tools").mkdir(parents=True)
    (code / "inference.py").write_text(SHARED_INFERENCE)
    (code / "lib" / "shared_tools" / "__init__.py").write_text("")
    (code / "lib" / "shared_tools" / "tag.py").write_text('TAG = "from-s3"\n')
    # Would need PyPI if installed: lib/ exists, so (as documented) it is not.
    (code / "requirements.txt").write_text("package-that-does-not-exist-h8==1.0\n")
    (s3_root / bucket / "other" / "inference.py").parent.mkdir(parents=True)
    (s3_root / bucket / "other" / "inference.py").write_text("raise RuntimeError('wrong')\n")


def test_downloaded_inference_script_handles_invoke(local_s3: LocalS3, tmp_path: Path) -> None:
    put_shared_code(local_s3.root, "bucket", "shared/code")
    models = tmp_path / "models"
    shutil.copytree(HALF_PLUS_THREE, models / "half_plus_three")
    work_dir = tmp_path / "work"
    work_dir.mkdir()
    env = s3_env(local_s3, tmp_path, "bucket", "shared/code")
    with running_stack(models, work_dir, env, multi_model=True) as stack:
        assert local_s3.list_requests >= 2  # 4 files, 2 per page
        downloaded = work_dir / "universal_code"
        assert (downloaded / "lib" / "shared_tools" / "tag.py").is_file()
        assert not (downloaded / "other").exists()
        assert "downloaded 4 files" in stack.log_text()
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
    local_s3: LocalS3, tmp_path: Path
) -> None:
    """No lib/: the gunicorn hook pip-installs the downloaded requirements.txt (a wheel that
    came from S3 too, so pip needs no index)."""
    code = local_s3.root / "bucket" / "code"
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
    env = s3_env(local_s3, tmp_path, "bucket", "code")
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
    local_s3: LocalS3, tmp_path: Path, bucket: str, overrides: dict[str, str], reason: str
) -> None:
    put_shared_code(local_s3.root, "bucket", "shared/code")
    models = tmp_path / "models"
    models.mkdir()
    work_dir = tmp_path / "work"
    work_dir.mkdir()
    env = s3_env(local_s3, tmp_path, bucket, "shared/code") | overrides
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
