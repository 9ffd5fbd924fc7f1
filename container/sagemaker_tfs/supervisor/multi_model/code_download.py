"""Shared user code for multi-model endpoints, downloaded from S3 once at start-up.

With ``SAGEMAKER_MULTI_MODEL_UNIVERSAL_BUCKET`` and ``_PREFIX`` set, every object under
``s3://BUCKET/PREFIX/`` is copied into ``StackConfig.multi_model.universal_code_dir`` before
gunicorn starts, keeping each key's path below the prefix (``PREFIX/lib/util.py`` ->
``DIR/lib/util.py``). The service then finds ``inference.py`` (and ``lib/``,
``requirements.txt``) there for every model without code of its own.

The prefix names a "directory": ``code`` and ``code/`` both list ``code/...`` only, never
``code2/...``. Keys that would land outside the target (``..``, absolute paths) stop the
download. Files are written to a sibling ``.partial`` directory that replaces the target
only when everything was downloaded, so a failed start-up never leaves half the code.

boto3 is imported lazily: the service and single-model stacks never need it.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

logger = logging.getLogger(__name__)

COPY_BUFFER_BYTES = 1 << 20


class CodeDownloadError(RuntimeError):
    """The shared code could not be downloaded; the message is one line saying why."""


class S3Client(Protocol):
    """The two S3 calls used here (a boto3 S3 client has both)."""

    def list_objects_v2(self, **kwargs: Any) -> dict[str, Any]: ...

    def get_object(self, **kwargs: Any) -> dict[str, Any]: ...


@dataclass(frozen=True)
class DownloadResult:
    files: int
    bytes: int


def normalized_prefix(prefix: str) -> str:
    """``code`` / ``/code/`` -> ``code/``; an empty prefix means the whole bucket."""
    stripped = prefix.strip("/")
    return f"{stripped}/" if stripped else ""


def default_s3_client() -> S3Client:
    """A boto3 S3 client (credentials, region and ``AWS_ENDPOINT_URL_S3`` from the env)."""
    try:
        import boto3
    except ImportError as error:
        raise CodeDownloadError(f"boto3 is not installed: {error}") from None
    # botocore logs where it found credentials/endpoints at INFO: start-up noise.
    logging.getLogger("botocore").setLevel(logging.WARNING)
    return boto3.client("s3")


def list_keys(client: S3Client, bucket: str, prefix: str) -> Iterator[str]:
    """Every object key under ``prefix``, following ListObjectsV2's continuation tokens."""
    request: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
    while True:
        page = client.list_objects_v2(**request)
        for item in page.get("Contents", []):
            yield item["Key"]
        token = page.get("NextContinuationToken")
        if not page.get("IsTruncated") or not token:
            return
        request["ContinuationToken"] = token


def relative_path(key: str, prefix: str) -> PurePosixPath | None:
    """The key's path below the prefix; None for "directory" marker keys.

    Raises ``CodeDownloadError`` for a key that would escape the target directory.
    """
    if not key.startswith(prefix):
        raise CodeDownloadError(f"S3 listed key {key!r} outside the prefix {prefix!r}")
    rest = key[len(prefix) :]
    if rest == "" or rest.endswith("/"):
        return None
    segments = rest.split("/")
    if "\\" in rest or any(segment in ("", ".", "..") for segment in segments):
        raise CodeDownloadError(
            f"refusing S3 key {key!r}: its path below the prefix is not a plain relative path"
        )
    return PurePosixPath(*segments)


def download_object(client: S3Client, bucket: str, key: str, destination: Path) -> int:
    """Stream one object into ``destination``; returns the number of bytes written."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    body = client.get_object(Bucket=bucket, Key=key)["Body"]
    try:
        with open(destination, "wb") as stream:
            shutil.copyfileobj(body, stream, COPY_BUFFER_BYTES)
            return stream.tell()
    finally:
        body.close()


def _download_all(client: S3Client, bucket: str, prefix: str, staging: Path) -> DownloadResult:
    files = size = 0
    for key in list_keys(client, bucket, prefix):
        relative = relative_path(key, prefix)
        if relative is None:
            continue
        size += download_object(client, bucket, key, staging.joinpath(*relative.parts))
        files += 1
    return DownloadResult(files, size)


def _client_errors() -> tuple[type[BaseException], ...]:
    """botocore's exception bases (no credentials, no such bucket, endpoint down...)."""
    try:
        from botocore.exceptions import BotoCoreError, ClientError
    except ImportError:
        return ()
    return (BotoCoreError, ClientError)


def download_code(
    bucket: str, prefix: str, target_dir: str, client: S3Client | None = None
) -> DownloadResult:
    """Replace ``target_dir`` with the objects under ``s3://bucket/prefix``.

    Raises ``CodeDownloadError`` with a one-line message when listing or any download fails.
    """
    prefix = normalized_prefix(prefix)
    uri = f"s3://{bucket}/{prefix}"
    target = Path(target_dir)
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    failures: tuple[type[BaseException], ...] = (OSError, *_client_errors())
    try:
        staging.mkdir(parents=True)
        result = _download_all(client or default_s3_client(), bucket, prefix, staging)
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
    except CodeDownloadError as error:
        shutil.rmtree(staging, ignore_errors=True)
        raise CodeDownloadError(f"downloading {uri} failed: {error}") from None
    except failures as error:
        shutil.rmtree(staging, ignore_errors=True)
        reason = " ".join(str(error).split()) or type(error).__name__
        raise CodeDownloadError(f"downloading {uri} failed: {reason}") from None
    level = logging.INFO if result.files else logging.WARNING
    logger.log(
        level,
        "downloaded %d files (%d bytes) from %s into %s",
        result.files,
        result.bytes,
        uri,
        target,
    )
    return result
