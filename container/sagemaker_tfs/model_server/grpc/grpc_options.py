"""The gRPC server's settings from TF Serving's flags: channel arguments and TLS.

``--grpc_channel_arguments=k=v,k=v``: split on commas, then each item on its first ``=``
(as TF Serving splits it, nothing trimmed); a value that reads as a 32-bit integer is an
integer argument, anything else a string. An item without ``=`` is refused (TF Serving reads
past the end of its split there). gRPC ignores keys it does not know.

``--ssl_config_file``: a text-format ``SSLConfig`` whose ``server_key``, ``server_cert`` and
``custom_ca`` hold PEM text (not paths); ``client_verify`` requires and checks client
certificates (against ``custom_ca`` when given). TLS covers the gRPC listeners only.
"""

from __future__ import annotations

import dataclasses
import re

import grpc

from sagemaker_tfs.model_server.errors import invalid_argument
from sagemaker_tfs.model_server.flag_file_protos import SSLConfig, read_flag_file

ChannelArgument = tuple[str, int | str]
_INT32 = re.compile(r"\s*[+-]?[0-9]+\s*")


def parse_channel_arguments(text: str) -> list[ChannelArgument]:
    """``--grpc_channel_arguments`` as (key, value) pairs; raises ServingError."""
    if not text:
        return []
    arguments: list[ChannelArgument] = []
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep:
            raise invalid_argument(f"grpc_channel_arguments: {item!r} is not key=value")
        value = value.split("=", 1)[0]  # TF Serving keeps the text up to a second '='
        integer = bool(_INT32.fullmatch(value)) and -(2**31) <= int(value) < 2**31
        arguments.append((key, int(value) if integer else value))
    return arguments


def merge_channel_arguments(
    defaults: list[ChannelArgument], given: list[ChannelArgument]
) -> list[ChannelArgument]:
    """``defaults`` with the keys ``given`` sets replaced by the given values."""
    keys = {key for key, _ in given}
    return [(key, value) for key, value in defaults if key not in keys] + given


@dataclasses.dataclass(frozen=True)
class TlsSettings:
    key: bytes
    certificate: bytes
    custom_ca: bytes | None
    client_verify: bool

    def credentials(self) -> grpc.ServerCredentials:
        return grpc.ssl_server_credentials(
            [(self.key, self.certificate)],
            root_certificates=self.custom_ca,
            require_client_auth=self.client_verify,
        )


def read_ssl_config(path: str) -> TlsSettings:
    """The TLS settings of an ``--ssl_config_file``; raises ServingError."""
    config = read_flag_file(path, SSLConfig())
    if not config.server_key or not config.server_cert:
        raise invalid_argument(f"{path}: server_key and server_cert must both be set")
    if config.client_verify and not config.custom_ca:
        # gRPC cannot verify client certificates without roots to verify them against.
        raise invalid_argument(f"{path}: client_verify needs custom_ca")
    return TlsSettings(
        config.server_key.encode(),
        config.server_cert.encode(),
        config.custom_ca.encode() or None,
        config.client_verify,
    )
