"""Where inputs come from and outputs go: local paths or S3 (boto3).

Inputs: a file, a directory (every file below it, sorted), an ``s3://bucket/prefix`` (every
object whose key starts with the prefix; S3Prefix) or a ManifestFile (a JSON array:
``[{"prefix": "s3://bucket/dir/"}, "key1", "sub/key2", ...]``; the prefix may be a local
directory too). Each input has a relative name: the path below the directory, the key below
the prefix's last ``/``, or the manifest's entry; its output is ``OUTPUT/<name>.out``.

Outputs are written to a temporary file and only then published under their name: a local
file is renamed into place; an S3 object is uploaded once complete (boto3's managed upload,
multipart when large). A failed job therefore leaves no partial ``.out``.

S3 uses one boto3 client (credentials, region and ``AWS_ENDPOINT_URL_S3`` from the
environment as usual), created on first use and shared by the worker threads.
"""

from __future__ import annotations

import functools
import io
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

READ_BUFFER_BYTES = 1 << 20
SPOOL_BYTES = 8 << 20


class StorageError(RuntimeError):
    """An input or output location cannot be read or written; the message says which."""


@dataclass(frozen=True)
class InputObject:
    name: str  # relative name; the output is <name>.out
    location: str  # where it is read from, for messages
    size: int | None
    open: Callable[[], BinaryIO]


def is_s3(uri: str) -> bool:
    return uri.startswith("s3://")


def split_s3(uri: str) -> tuple[str, str]:
    bucket, _, key = uri[len("s3://") :].partition("/")
    if not bucket:
        raise StorageError(f"{uri!r} names no bucket (s3://BUCKET/PREFIX)")
    return bucket, key


@functools.cache
def s3_client() -> Any:
    import boto3  # lazily: a local job never needs it

    # A session of its own: boto3's default session caches the credentials it resolved.
    return boto3.session.Session().client("s3")


def _s3_call(what: str, call: Callable[[], Any]) -> Any:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return call()
    except (BotoCoreError, ClientError) as error:
        raise StorageError(f"{what}: {error}") from None


class _S3Raw(io.RawIOBase):
    """A boto3 StreamingBody as a raw stream, so it can be buffered (``readline``)."""

    def __init__(self, body: Any) -> None:
        self.body = body

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.body.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self.body.close()
        super().close()


def _open_s3(bucket: str, key: str) -> BinaryIO:
    uri = f"s3://{bucket}/{key}"
    response = _s3_call(f"reading {uri}", lambda: s3_client().get_object(Bucket=bucket, Key=key))
    return io.BufferedReader(_S3Raw(response["Body"]), READ_BUFFER_BYTES)


def _s3_input(bucket: str, key: str, name: str, size: int | None) -> InputObject:
    return InputObject(name, f"s3://{bucket}/{key}", size, lambda: _open_s3(bucket, key))


def _local_input(path: Path, name: str) -> InputObject:
    return InputObject(
        name,
        str(path),
        path.stat().st_size,
        lambda: open(path, "rb", buffering=READ_BUFFER_BYTES),  # noqa: SIM115 - caller closes
    )


def list_inputs(uri: str, manifest: bool = False) -> Iterator[InputObject]:
    """The job's input objects, in a stable order (listed lazily, page by page)."""
    if manifest:
        yield from _manifest_inputs(uri)
    elif is_s3(uri):
        yield from _s3_prefix_inputs(uri)
    else:
        yield from _local_inputs(Path(uri))


def _local_inputs(root: Path) -> Iterator[InputObject]:
    if root.is_file():
        yield _local_input(root, root.name)
        return
    if not root.is_dir():
        raise StorageError(f"input {str(root)!r} does not exist")
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        yield _local_input(path, path.relative_to(root).as_posix())


def _s3_prefix_inputs(uri: str) -> Iterator[InputObject]:
    bucket, prefix = split_s3(uri)
    base = prefix[: prefix.rfind("/") + 1]
    paginator = s3_client().get_paginator("list_objects_v2")
    pages = _s3_call(
        f"listing {uri}", lambda: iter(paginator.paginate(Bucket=bucket, Prefix=prefix))
    )
    while True:
        page = _s3_call(f"listing {uri}", lambda: next(pages, None))
        if page is None:
            return
        for item in page.get("Contents", []):
            key = item["Key"]
            if not key.endswith("/"):  # "directory" placeholder objects
                yield _s3_input(bucket, key, key[len(base) :], item.get("Size"))


def _read_manifest(uri: str) -> Any:
    if is_s3(uri):
        with _open_s3(*split_s3(uri)) as stream:
            text = stream.read()
    else:
        try:
            text = Path(uri).read_bytes()
        except OSError as error:
            raise StorageError(f"manifest {uri!r}: {error.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise StorageError(f"manifest {uri!r} is not JSON: {error}") from None


def _manifest_inputs(uri: str) -> Iterator[InputObject]:
    entries = _read_manifest(uri)
    if (
        not isinstance(entries, list)
        or not entries
        or not isinstance(entries[0], dict)
        or not isinstance(entries[0].get("prefix"), str)
        or not all(isinstance(e, str) and e for e in entries[1:])
    ):
        raise StorageError(
            f'manifest {uri!r} must be [{{"prefix": "s3://bucket/dir/"}}, "key", ...]'
        )
    prefix: str = entries[0]["prefix"]
    for relative in entries[1:]:
        if ".." in relative.split("/") or relative.startswith("/"):
            raise StorageError(f"manifest {uri!r}: entry {relative!r} leaves the prefix")
        if is_s3(prefix):
            bucket, key_prefix = split_s3(prefix)
            yield _s3_input(bucket, key_prefix + relative, relative, None)
        else:
            path = Path(prefix) / relative
            if not path.is_file():
                raise StorageError(f"manifest {uri!r}: {str(path)!r} does not exist")
            yield _local_input(path, relative)


class OutputSink:
    """One output object, written to a temporary file and published by ``commit``."""

    def __init__(self, output: str, name: str) -> None:
        self.name = name + ".out"
        self.location = _join(output, self.name)
        if is_s3(output):
            # Closed by commit() or abort().
            self._file: BinaryIO = tempfile.SpooledTemporaryFile(SPOOL_BYTES)  # type: ignore[assignment]  # noqa: SIM115
            self._final: Path | None = None
        else:
            self._final = Path(self.location)
            try:
                self._final.parent.mkdir(parents=True, exist_ok=True)
                handle, temp = tempfile.mkstemp(
                    prefix=f".{self._final.name}.", suffix=".partial", dir=self._final.parent
                )
            except OSError as error:
                raise StorageError(f"cannot write {self.location}: {error.strerror}") from None
            self._temp = Path(temp)
            self._file = os.fdopen(handle, "wb")
        self.bytes = 0

    def write(self, data: bytes) -> None:
        self._file.write(data)
        self.bytes += len(data)

    def commit(self) -> None:
        if self._final is not None:
            self._file.close()
            os.replace(self._temp, self._final)
            return
        bucket, key = split_s3(self.location)
        self._file.seek(0)
        _s3_call(
            f"writing {self.location}", lambda: s3_client().upload_fileobj(self._file, bucket, key)
        )
        self._file.close()

    def abort(self) -> None:
        self._file.close()
        if self._final is not None:
            self._temp.unlink(missing_ok=True)


def _join(output: str, name: str) -> str:
    if is_s3(output):
        return output.rstrip("/") + "/" + name
    return str(Path(output) / name)
