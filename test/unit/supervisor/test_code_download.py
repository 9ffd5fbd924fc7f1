"""code_download: listing, paths below the prefix, refused keys, errors.

boto3 cannot reach AWS here, so the S3 API is the only thing replaced: ``StandInS3`` answers
``list_objects_v2`` / ``get_object`` from a dict, ``page_size`` keys per page, the way S3
does (continuation tokens, ``IsTruncated``). The errors it raises are botocore's own.
The last test uses a real boto3 client with no credentials at all.
"""

from __future__ import annotations

import io
import logging
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError
from sagemaker_tfs.supervisor.multi_model.code_download import (
    CodeDownloadError,
    download_code,
    list_keys,
    normalized_prefix,
    relative_path,
)


class StandInS3:
    """The two S3 calls code_download makes, over ``objects`` {key: bytes} in one bucket."""

    def __init__(self, bucket: str, objects: dict[str, bytes], page_size: int = 1000) -> None:
        self.bucket = bucket
        self.objects = objects
        self.page_size = page_size
        self.list_calls: list[dict[str, Any]] = []
        self.fail_get: ClientError | None = None

    def _check_bucket(self, bucket: str, operation: str) -> None:
        if bucket != self.bucket:
            error = {"Code": "NoSuchBucket", "Message": "The specified bucket does not exist"}
            raise ClientError({"Error": error}, operation)

    def list_objects_v2(self, **kwargs: Any) -> dict[str, Any]:
        self.list_calls.append(kwargs)
        self._check_bucket(kwargs["Bucket"], "ListObjectsV2")
        keys = sorted(k for k in self.objects if k.startswith(kwargs.get("Prefix", "")))
        start = kwargs.get("ContinuationToken", "")
        keys = [k for k in keys if k > start]
        page, rest = keys[: self.page_size], keys[self.page_size :]
        answer: dict[str, Any] = {"KeyCount": len(page), "IsTruncated": bool(rest)}
        if page:
            answer["Contents"] = [{"Key": k, "Size": len(self.objects[k])} for k in page]
        if rest:
            answer["NextContinuationToken"] = page[-1]
        return answer

    def get_object(self, **kwargs: Any) -> dict[str, Any]:
        self._check_bucket(kwargs["Bucket"], "GetObject")
        if self.fail_get is not None:
            raise self.fail_get
        return {"Body": io.BytesIO(self.objects[kwargs["Key"]])}


def files_under(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [("code", "code/"), ("/code/", "code/"), ("a/b", "a/b/"), ("", ""), ("/", "")],
)
def test_prefix_is_a_directory(prefix: str, expected: str) -> None:
    assert normalized_prefix(prefix) == expected


def test_listing_follows_continuation_tokens() -> None:
    objects = {f"code/f{i:02d}.py": b"x" for i in range(7)}
    client = StandInS3("bucket", objects, page_size=3)
    assert list(list_keys(client, "bucket", "code/")) == sorted(objects)
    assert len(client.list_calls) == 3
    assert "ContinuationToken" not in client.list_calls[0]
    assert client.list_calls[2]["ContinuationToken"] == "code/f05.py"


def test_download_keeps_paths_below_the_prefix(tmp_path: Path) -> None:
    objects = {
        "shared/code/inference.py": b"def handler(data, context): ...\n",
        "shared/code/requirements.txt": b"six\n",
        "shared/code/lib/pkg/__init__.py": b"",
        "shared/code/lib/pkg/deep/util.py": b"VALUE = 1\n",
        "shared/code/lib/": b"",  # a "folder" marker the console creates
        "shared/codex/other.py": b"not ours",
        "elsewhere/inference.py": b"not ours",
    }
    client = StandInS3("bucket", objects, page_size=2)
    target = tmp_path / "universal_code"
    result = download_code("bucket", "shared/code", str(target), client)
    assert files_under(target) == {
        "inference.py": objects["shared/code/inference.py"],
        "requirements.txt": b"six\n",
        "lib/pkg/__init__.py": b"",
        "lib/pkg/deep/util.py": b"VALUE = 1\n",
    }
    assert (result.files, result.bytes) == (4, sum(len(v) for v in files_under(target).values()))
    assert not (tmp_path / "universal_code.partial").exists()


def test_download_replaces_what_a_previous_start_left(tmp_path: Path) -> None:
    target = tmp_path / "universal_code"
    (target / "lib").mkdir(parents=True)
    (target / "lib" / "stale.py").write_text("old")
    client = StandInS3("bucket", {"p/inference.py": b"new"})
    download_code("bucket", "p/", str(target), client)
    assert files_under(target) == {"inference.py": b"new"}


def test_whole_bucket_when_the_prefix_is_slash(tmp_path: Path) -> None:
    client = StandInS3("bucket", {"inference.py": b"a", "lib/x.py": b"b"})
    download_code("bucket", "/", str(tmp_path / "t"), client)
    assert files_under(tmp_path / "t") == {"inference.py": b"a", "lib/x.py": b"b"}


@pytest.mark.parametrize(
    "key",
    [
        "code/../escape.py",
        "code/lib/../../escape.py",
        "code//etc/passwd",
        "code/./inference.py",
        "code/..\\escape.py",
    ],
)
def test_keys_that_would_escape_are_refused(tmp_path: Path, key: str) -> None:
    client = StandInS3("bucket", {"code/inference.py": b"ok", key: b"evil"})
    target = tmp_path / "deep" / "universal_code"
    with pytest.raises(CodeDownloadError) as raised:
        download_code("bucket", "code", str(target), client)
    message = str(raised.value)
    assert message.startswith("downloading s3://bucket/code/ failed: refusing S3 key")
    assert repr(key) in message
    assert "\n" not in message
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["deep"]  # nothing written anywhere


def test_relative_path_rejects_a_key_outside_the_prefix() -> None:
    with pytest.raises(CodeDownloadError, match="outside the prefix"):
        relative_path("other/x.py", "code/")


def test_no_such_bucket_is_one_clear_line(tmp_path: Path) -> None:
    client = StandInS3("bucket", {"code/inference.py": b"ok"})
    with pytest.raises(CodeDownloadError) as raised:
        download_code("no-such-bucket", "code", str(tmp_path / "t"), client)
    assert str(raised.value) == (
        "downloading s3://no-such-bucket/code/ failed: An error occurred (NoSuchBucket) when "
        "calling the ListObjectsV2 operation: The specified bucket does not exist"
    )
    assert not (tmp_path / "t").exists() and not (tmp_path / "t.partial").exists()


def test_a_failed_object_download_keeps_the_previous_code(tmp_path: Path) -> None:
    target = tmp_path / "t"
    target.mkdir()
    (target / "inference.py").write_text("previous")
    client = StandInS3("bucket", {"code/a.py": b"a", "code/b.py": b"b"})
    client.fail_get = ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, "GetObject")
    with pytest.raises(CodeDownloadError, match=r"\(AccessDenied\) when calling the GetObject"):
        download_code("bucket", "code", str(target), client)
    assert files_under(target) == {"inference.py": b"previous"}
    assert not (tmp_path / "t.partial").exists()


def test_one_log_line_per_download(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    client = StandInS3("bucket", {"code/a.py": b"abc", "code/lib/b.py": b"de"})
    with caplog.at_level(logging.INFO, logger="sagemaker_tfs.supervisor.multi_model.code_download"):
        download_code("bucket", "code", str(tmp_path / "t"), client)
    assert [r.getMessage() for r in caplog.records] == [
        f"downloaded 2 files (5 bytes) from s3://bucket/code/ into {tmp_path / 't'}"
    ]


def test_an_empty_prefix_listing_is_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    client = StandInS3("bucket", {"other/a.py": b"abc"})
    with caplog.at_level(logging.INFO, logger="sagemaker_tfs.supervisor.multi_model.code_download"):
        result = download_code("bucket", "code", str(tmp_path / "t"), client)
    assert result.files == 0 and (tmp_path / "t").is_dir()
    assert [r.levelno for r in caplog.records] == [logging.WARNING]


def test_real_boto3_without_credentials_fails_clearly(
    tmp_path: Path, no_aws_credentials: None
) -> None:
    """No mock: boto3 itself finds no credentials (no network is touched)."""
    with pytest.raises(CodeDownloadError) as raised:
        download_code("bucket", "code", str(tmp_path / "t"))
    assert str(raised.value) == "downloading s3://bucket/code/ failed: Unable to locate credentials"
