"""The text-format config messages of TF Serving's flags that tensorflow-serving-api lacks.

``--monitoring_config_file`` reads a ``tensorflow.serving.MonitoringConfig`` and
``--ssl_config_file`` a ``tensorflow.serving.SSLConfig``; the pip package ships neither
``.proto``. Both messages are declared here field by field (the names and numbers of TF
Serving's ``monitoring_config.proto`` and ``ssl_config.proto``) in a private descriptor pool,
so text-format files written for TF Serving parse the same, errors included.
``read_flag_file`` reads any such file (these, and ``--tensorflow_session_config_file``).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TypeVar

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format
from google.protobuf.message import Message

from sagemaker_tfs.model_server.errors import Code, ServingError, invalid_argument

logger = logging.getLogger(__name__)
FlagMessage = TypeVar("FlagMessage", bound=Message)

_FieldType = descriptor_pb2.FieldDescriptorProto
_PACKAGE = "tensorflow.serving"

# message -> [(field, number, type, message type of a message field)]
_MESSAGES: dict[str, list[tuple[str, int, int, str]]] = {
    "PrometheusConfig": [
        ("enable", 1, _FieldType.TYPE_BOOL, ""),
        ("path", 2, _FieldType.TYPE_STRING, ""),
    ],
    "MonitoringConfig": [
        ("prometheus_config", 1, _FieldType.TYPE_MESSAGE, "PrometheusConfig"),
    ],
    "SSLConfig": [
        ("server_key", 1, _FieldType.TYPE_STRING, ""),
        ("server_cert", 2, _FieldType.TYPE_STRING, ""),
        ("custom_ca", 3, _FieldType.TYPE_STRING, ""),
        ("client_verify", 4, _FieldType.TYPE_BOOL, ""),
    ],
}


def _build_pool() -> descriptor_pool.DescriptorPool:
    file = descriptor_pb2.FileDescriptorProto(
        name="sagemaker_tfs/model_server/flag_file_protos.proto", package=_PACKAGE, syntax="proto3"
    )
    for message_name, fields in _MESSAGES.items():
        message = file.message_type.add(name=message_name)
        for name, number, field_type, type_name in fields:
            field = message.field.add(
                name=name, number=number, type=field_type, label=_FieldType.LABEL_OPTIONAL
            )
            if type_name:
                field.type_name = f".{_PACKAGE}.{type_name}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return pool


_POOL = _build_pool()


def _message(name: str) -> type:
    return message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{_PACKAGE}.{name}"))


MonitoringConfig = _message("MonitoringConfig")
SSLConfig = _message("SSLConfig")


def read_flag_file(path: str, message: FlagMessage) -> FlagMessage:
    """``message`` filled from the text-format file ``path``, with TF Serving's errors:
    ``NOT_FOUND: PATH; No such file or directory``, ``INVALID_ARGUMENT: Invalid protobuf
    file: 'PATH'`` (the parser's reason logged, as TF Serving logs it)."""
    try:
        text_format.Parse(Path(path).read_text(), message)
    except FileNotFoundError:
        raise ServingError(Code.NOT_FOUND, f"{path}; No such file or directory") from None
    except (OSError, UnicodeDecodeError, text_format.ParseError) as error:
        logger.error("Error parsing text-format %s: %s", message.DESCRIPTOR.full_name, error)
        raise invalid_argument(f"Invalid protobuf file: '{path}'") from None
    return message
