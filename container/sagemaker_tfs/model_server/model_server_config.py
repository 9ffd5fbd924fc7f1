"""Text-format ``ModelServerConfig``: parsing, validation and the single-model shortcut.

The proto classes come from ``tensorflow_serving.config``; this module only adds the
checks TF Serving performs and a typed view used by the manager.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from pathlib import Path

from google.protobuf import text_format
from tensorflow_serving.config import model_server_config_pb2
from tensorflow_serving.config.model_server_config_pb2 import ModelConfig, ModelServerConfig

from sagemaker_tfs.model_server.errors import Code, ServingError, invalid_argument, not_found
from sagemaker_tfs.model_server.flags import ServerOptions

logger = logging.getLogger(__name__)
_LOCATION_PREFIX = re.compile(r"^\d+(:\d+)? : ")


@dataclasses.dataclass(frozen=True)
class VersionPolicy:
    """Which versions to serve: ``latest`` (newest N), ``all`` or ``specific``."""

    kind: str
    num_versions: int = 1
    versions: tuple[int, ...] = ()

    def select(self, available: list[int]) -> list[int]:
        """The versions of ``available`` this policy serves, newest first."""
        newest_first = sorted(available, reverse=True)
        if self.kind == "all":
            return newest_first
        if self.kind == "specific":
            return [version for version in newest_first if version in self.versions]
        return newest_first[: self.num_versions]

    def describe(self) -> str:
        if self.kind == "specific":
            return f"specific {list(self.versions)}"
        if self.kind == "latest":
            return f"latest {self.num_versions}"
        return "all"


@dataclasses.dataclass(frozen=True)
class ConfiguredModel:
    """One model of the config: where it lives, which versions, which labels (not to be
    confused with a request's ``ModelSpec`` nor the supervisor's ``config.ModelSpec``)."""

    name: str
    base_path: str
    policy: VersionPolicy
    labels: dict[str, int]


def parse_text(text: str) -> ModelServerConfig:
    """Parse text-format ModelServerConfig; a syntax error logs TF Serving's line
    (``Error parsing text-format tensorflow.serving.ModelServerConfig: LINE:COLUMN: reason``)
    and raises ``ServingError(INVALID_ARGUMENT)`` with the parser's message."""
    config = ModelServerConfig()
    try:
        text_format.Parse(text, config)
    except text_format.ParseError as error:
        reason = _LOCATION_PREFIX.sub("", str(error))
        where = f"{error.GetLine()}:{error.GetColumn()}" if error.GetLine() else ""
        message = f"{where}: {reason}" if where else reason
        logger.error(
            "Error parsing text-format %s: %s", ModelServerConfig.DESCRIPTOR.full_name, message
        )
        raise invalid_argument(message) from None
    return config


def load_file(path: str) -> ModelServerConfig:
    """The config in the file, with TF Serving's errors: ``NOT_FOUND: PATH; No such file or
    directory``, ``INVALID_ARGUMENT: Invalid protobuf file: 'PATH'``."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise not_found(f"{path}; No such file or directory") from None
    except (OSError, UnicodeDecodeError) as error:
        raise invalid_argument(f"{path}; {error}") from None
    try:
        return parse_text(text)
    except ServingError:
        raise invalid_argument(f"Invalid protobuf file: '{path}'") from None


def from_options(options: ServerOptions) -> ModelServerConfig:
    """The config in effect: the file (which wins over --model_name/--model_base_path, as in
    TF Serving), or one model from --model_name/--model_base_path."""
    if options.model_config_file:
        return load_file(options.model_config_file)
    config = ModelServerConfig()
    model = config.model_config_list.config.add()
    model.name = options.model_name
    model.base_path = options.model_base_path
    model.model_platform = "tensorflow"
    return config


def _policy(model: ModelConfig) -> VersionPolicy:
    policy = model.model_version_policy
    which = policy.WhichOneof("policy_choice")
    if which == "all":
        return VersionPolicy("all")
    if which == "specific":
        if not policy.specific.versions:
            raise invalid_argument(f"Model {model.name}: specific version policy lists no versions")
        return VersionPolicy("specific", versions=tuple(policy.specific.versions))
    num_versions = policy.latest.num_versions if which == "latest" else 0
    return VersionPolicy("latest", num_versions=max(num_versions, 1))


def _platform(model: ModelConfig) -> str:
    if model.model_type != model_server_config_pb2.MODEL_TYPE_UNSPECIFIED:
        if model.model_platform:
            raise ServingError(
                Code.FAILED_PRECONDITION,
                "Illegal setting both ModelServerConfig::model_type (deprecated) and "
                f"ModelServerConfig::model_platform, model name is {model.name}",
            )
        return "tensorflow" if model.model_type == model_server_config_pb2.TENSORFLOW else "other"
    if not model.model_platform:
        raise ServingError(
            Code.FAILED_PRECONDITION,
            "Illegal setting neither ModelServerConfig::model_type (deprecated) nor "
            f"ModelServerConfig::model_platform, model name is {model.name}",
        )
    return model.model_platform


def model_specs(config: ModelServerConfig) -> list[ConfiguredModel]:
    """Validate ``config`` as TF Serving does and return one ``ConfiguredModel`` per model."""
    if config.WhichOneof("config") == "custom_model_config":
        raise ServingError(Code.UNIMPLEMENTED, "custom_model_config is not supported")
    specs: list[ConfiguredModel] = []
    seen: set[str] = set()
    for model in config.model_config_list.config:
        if model.name in seen:
            raise invalid_argument(
                f"Illegal to list model {model.name} multiple times in config list"
            )
        seen.add(model.name)
        if not (model.base_path.startswith("/") or "://" in model.base_path):
            raise invalid_argument(
                f"Expected model {model.name} to have an absolute path or URI; "
                f"got base_path()={model.base_path}",
            )
        platform = _platform(model)
        if platform != "tensorflow":
            raise invalid_argument(f"Model {model.name} requests unsupported platform {platform}")
        specs.append(
            ConfiguredModel(model.name, model.base_path, _policy(model), dict(model.version_labels))
        )
    return specs


def to_text(config: ModelServerConfig) -> str:
    """One-line rendering for the start-up log."""
    return text_format.MessageToString(config, as_one_line=True)
