"""A real S3-compatible server for tests: moto's server mode on a free port of 127.0.0.1.

AWS cannot be reached here, so S3 is emulated by moto (a maintained emulator), run as an
HTTP server in a thread of the test process. Code under test reaches it over a socket
through ``AWS_ENDPOINT_URL_S3`` with dummy credentials, exactly as it reaches AWS
(subprocesses get the same variables from ``S3Server.env``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from local_ports import free_port


class S3Server:
    def __init__(self, endpoint: str, config_dir: Path) -> None:
        self.endpoint = endpoint
        self.config_dir = config_dir

    @property
    def env(self) -> dict[str, str]:
        """Environment that points boto3 at this server (and nowhere else)."""
        return {
            "AWS_ENDPOINT_URL_S3": self.endpoint,
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_CONFIG_FILE": str(self.config_dir / "no-aws-config"),
            "AWS_SHARED_CREDENTIALS_FILE": str(self.config_dir / "no-aws-credentials"),
        }

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
        )

    def put_tree(self, bucket: str, prefix: str, root: Path) -> None:
        """Upload every file below ``root`` to ``s3://bucket/prefix<relative path>``."""
        client = self.client()
        with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
            client.create_bucket(Bucket=bucket)
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            client.upload_file(str(path), bucket, prefix + path.relative_to(root).as_posix())

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        pages = (
            self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        )
        return [item["Key"] for page in pages for item in page.get("Contents", [])]

    def read(self, bucket: str, key: str) -> bytes:
        return self.client().get_object(Bucket=bucket, Key=key)["Body"].read()


@contextlib.contextmanager
def s3_server(config_dir: Path) -> Iterator[S3Server]:
    """moto's S3 server for the duration of the ``with`` block (fresh, empty state)."""
    import requests
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one access-log line per request
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    try:
        # moto keeps its state per process: start from an empty one.
        requests.post(endpoint + "/moto-api/reset", timeout=30).raise_for_status()
        yield S3Server(endpoint, config_dir)
    finally:
        server.stop()
