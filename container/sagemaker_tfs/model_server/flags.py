"""``tensorflow_model_server``'s command line: its 48 flags, parsed as TF Serving parses them.

The rules are those of TensorFlow's flag parser (TSL ``Flags::Parse``):

- a flag is ``--name=value`` only; a boolean may also be a bare ``--name`` (true). ``--name
  value`` is not a flag: both words are left over (and a bare non-boolean name is too);
- booleans take ``true``/``false`` in any case or ``1``/``0``; integers are decimal with an
  optional sign and surrounding blanks, within their type's range; a repeated flag's last
  value wins; ``--`` ends the flags (it and what follows are left over);
- a value that does not parse is an error (``Couldn't interpret value V for flag F.``);
- what is left over is not an error: the server names the first word and goes on
  (``main.py``), except ``--help`` as the first leftover, which asks for the usage text.

``ServerOptions`` declares every flag in TF Serving's order, one typed field each, with its type
word, default, help and whether it only tunes TF Serving's C++ runtime (then this server
accepts it and logs once that it has no effect); ``FLAGS`` is read off its fields. Checks
across flags are in ``server_setup.check_options``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import TypeVar, overload

from sagemaker_tfs.container_limits import stack_cpus

# What one flag holds: ServerOptions' fields are of these types alone.
FlagValue = bool | int | float | str
_Value = TypeVar("_Value", bool, int, float, str)

INT32_RANGE = (-(2**31), 2**31 - 1)
INT64_RANGE = (-(2**63), 2**63 - 1)
_INTEGER = re.compile(r"\s*[+-]?[0-9]+\s*")
_FLOAT = re.compile(
    r"\s*[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?\s*|\s*[+-]?(inf|infinity|nan)\s*", re.I
)


@dataclasses.dataclass(frozen=True)
class Flag:
    """One flag: its name, TSL type word, default, help text, and whether it is a runtime-only
    tuning knob of TF Serving's C++ server that this server accepts without effect."""

    name: str
    type: str  # int32 | int64 | bool | string | float
    default: FlagValue
    help: str
    runtime_only: bool = False


@dataclasses.dataclass(frozen=True)
class _FlagSpec:
    """What a ``ServerOptions`` field says of its flag besides its name and default."""

    type: str
    help: str
    runtime_only: bool


@dataclasses.dataclass(frozen=True)
class CpusTimes:
    """A default of this many times the CPUs the stack may use (TF Serving counts its affinity
    mask; the container's CPU quota counts here too)."""

    factor: int

    def __call__(self) -> int:
        return self.factor * stack_cpus()


@overload
def _flag(
    type_word: str, default: CpusTimes, help_text: str, runtime_only: bool = False
) -> int: ...


@overload
def _flag(
    type_word: str, default: _Value, help_text: str, runtime_only: bool = False
) -> _Value: ...


def _flag(
    type_word: str, default: FlagValue | CpusTimes, help_text: str, runtime_only: bool = False
) -> FlagValue:
    """A ``ServerOptions`` field for one flag."""
    metadata = {"flag": _FlagSpec(type_word, help_text, runtime_only)}
    if isinstance(default, CpusTimes):
        return dataclasses.field(default_factory=default, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


@dataclasses.dataclass(frozen=True)
class ServerOptions:
    """The parsed flags: one field per flag of TF Serving, in its order, with its default.

    This class is the one table of the flags: ``FLAGS`` is read off its fields, so a flag
    added here is parsed, checked for its type and shown in the usage text.
    """

    # fmt: off
    port: int = _flag("int32", 8500, "TCP port of the gRPC API (0: no TCP listener; then "
        "--grpc_socket_path must be set)")
    grpc_socket_path: str = _flag("string", "", "Also serve the gRPC API on this UNIX socket")
    rest_api_port: int = _flag("int32", 0, "Port of the HTTP/REST API and of the metrics endpoint "
        "(0: no REST API)")
    rest_api_num_threads: int = _flag("int32", CpusTimes(4), "How many REST requests run at once")
    rest_api_timeout_in_ms: int = _flag("int32", 30000, "Time allowed for a REST predict, classify "
        "or regress call (<= 0: no limit)")
    rest_api_enable_cors_support: bool = _flag("bool", False, "Answer /v1/ requests with CORS "
        "headers")
    enable_batching: bool = _flag("bool", False, "Batch concurrent requests to a model")
    allow_version_labels_for_unavailable_models: bool = _flag("bool", False, "Let a new version "
        "label point at a version that is not available yet")
    batching_parameters_file: str = _flag("string", "", "Text-format BatchingParameters (needs "
        "--enable_batching)")
    enable_per_model_batching_parameters: bool = _flag("bool", False, "Read each version's "
        "batching_params.pbtxt (a version without one is not batched)")
    model_config_file: str = _flag("string", "", "Text-format ModelServerConfig naming the models "
        "to serve; --model_name and --model_base_path are then ignored")
    model_config_file_poll_wait_seconds: int = _flag("int32", 0, "Re-read --model_config_file this "
        "often (<= 0: read it once at start-up)")
    model_name: str = _flag("string", "default", "Name of the one model of --model_base_path")
    model_base_path: str = _flag("string", "", "Directory of the one model's numbered versions "
        "(absolute path)")
    num_load_threads: int = _flag("int32", 0, "Threads loading models after start-up", True)
    num_unload_threads: int = _flag("int32", 0, "Threads unloading models", True)
    max_num_load_retries: int = _flag("int32", 5, "Further attempts after a version fails to load")
    load_retry_interval_micros: int = _flag("int64", 60_000_000, "Wait between load attempts "
        "(negative: none)")
    file_system_poll_wait_seconds: int = _flag("int32", 1, "How often base paths are scanned for "
        "new versions (0: once; negative: never)")
    flush_filesystem_caches: bool = _flag("bool", True, "Flush file system caches after "
        "loading", True)
    tensorflow_session_parallelism: int = _flag("int64", 0, "Intra- and inter-op threads when "
        "neither of the two flags below is set (0: automatic)")
    tensorflow_session_config_file: str = _flag("string", "", "Text-format TensorFlow ConfigProto "
        "for the sessions; the thread and GPU flags override it")
    tensorflow_intra_op_parallelism: int = _flag("int64", 0, "Threads inside one op (0: automatic)")
    tensorflow_inter_op_parallelism: int = _flag("int64", 0, "Ops run at once (0: automatic)")
    use_alts_credentials: bool = _flag("bool", False, "Secure gRPC with Google ALTS", True)
    ssl_config_file: str = _flag("string", "", "Text-format SSLConfig: TLS on the gRPC listeners")
    platform_config_file: str = _flag("string", "", "Text-format PlatformConfigMap replacing the "
        "built-in TensorFlow platform", True)
    per_process_gpu_memory_fraction: float = _flag("float", 0.0, "Share of GPU memory each process "
        "takes (0: TensorFlow's choice)")
    saved_model_tags: str = _flag("string", "serve", "Comma-separated tags of the MetaGraph to "
        "load")
    grpc_channel_arguments: str = _flag("string", "", "gRPC server arguments as "
        "key=value,key=value (integers where they parse as one)")
    grpc_max_threads: int = _flag("int32", CpusTimes(4), "Threads of the gRPC server", True)
    enable_model_warmup: bool = _flag("bool", True, "Replay "
        "assets.extra/tf_serving_warmup_requests before a version is available")
    num_request_iterations_for_warmup: int = _flag("int32", 0, "Times each warm-up record is "
        "replayed (0: once)")
    version: bool = _flag("bool", False, "Print the versions and exit")
    monitoring_config_file: str = _flag("string", "", "Text-format MonitoringConfig: the "
        "Prometheus endpoint on the REST port")
    remove_unused_fields_from_bundle_metagraph: bool = _flag("bool", True, "Drop MetaGraph fields "
        "serving does not need", True)
    prefer_tflite_model: bool = _flag("bool", False, "Serve model.tflite when a version has one "
        "(Predict through the TensorFlow Lite interpreter)")
    num_tflite_pools: int = _flag("int32", CpusTimes(1), "TensorFlow Lite interpreter pools")
    num_tflite_interpreters_per_pool: int = _flag("int32", 1, "Interpreters in each pool")
    enable_signature_method_name_check: bool = _flag("bool", False, "Classify and Regress need "
        "signatures of their method name, Predict one of the three")
    xla_cpu_compilation_enabled: bool = _flag("bool", False, "XLA JIT on CPU", True)
    xla_gpu_compilation_enabled: bool = _flag("bool", False, "XLA JIT on CPU and GPU", True)
    enable_profiler: bool = _flag("bool", True, "TensorFlow's profiler service on the gRPC "
        "port", True)
    thread_pool_factory_config_file: str = _flag("string", "", "Text-format "
        "ThreadPoolFactoryConfig for request thread pools", True)
    mixed_precision: str = _flag("string", "", "bfloat16: automatic mixed precision on "
        "oneDNN CPUs", True)
    skip_initialize_tpu: bool = _flag("bool", False, "Do not initialise the TPU system", True)
    enable_grpc_healthcheck_service: bool = _flag("bool", False, "Serve grpc.health.v1.Health on "
        "the gRPC listeners")
    enable_serialization_as_tensor_content: bool = _flag("bool", False, "gRPC Predict answers with "
        "packed tensor_content")
    # fmt: on


def _flags_of_options() -> tuple[Flag, ...]:
    defaults = ServerOptions()
    return tuple(
        Flag(field.name, default=getattr(defaults, field.name), **vars(field.metadata["flag"]))
        for field in dataclasses.fields(ServerOptions)
    )


FLAGS = _flags_of_options()
FLAGS_BY_NAME = {flag.name: flag for flag in FLAGS}


def changed_runtime_flags(options: ServerOptions) -> list[str]:
    """The runtime-only flags given a value other than their default."""
    return [
        flag.name
        for flag in FLAGS
        if flag.runtime_only and getattr(options, flag.name) != flag.default
    ]


class FlagValueError(ValueError):
    """A flag's value does not parse; the message is TF Serving's log text."""


@dataclasses.dataclass(frozen=True)
class ParsedCommandLine:
    """The options, the words that are not flags, and the value errors (all of them)."""

    options: ServerOptions
    leftovers: list[str]
    errors: list[str]

    @property
    def help_requested(self) -> bool:
        return bool(self.leftovers) and self.leftovers[0] == "--help"


def _convert(flag: Flag, text: str) -> FlagValue:
    if flag.type == "string":
        return text
    if flag.type == "bool":
        lowered = text.lower()
        if lowered in ("true", "1"):
            return True
        if lowered in ("false", "0"):
            return False
    elif flag.type in ("int32", "int64") and _INTEGER.fullmatch(text):
        low, high = INT32_RANGE if flag.type == "int32" else INT64_RANGE
        value = int(text)
        if low <= value <= high:
            return value
    elif flag.type == "float" and _FLOAT.fullmatch(text):
        return float(text)
    raise FlagValueError(f"Couldn't interpret value {text} for flag {flag.name}.")


def _match(arg: str) -> tuple[Flag, str | None] | None:
    """The flag ``arg`` sets and its value text (None for a bare boolean), if any."""
    if not arg.startswith("--"):
        return None
    name, sep, value = arg[2:].partition("=")
    flag = FLAGS_BY_NAME.get(name)
    if flag is None or (not sep and flag.type != "bool"):
        return None
    return flag, (value if sep else None)


def parse_command_line(argv: Sequence[str]) -> ParsedCommandLine:
    """Parse ``argv`` (without the program name) the way TF Serving's binary does."""
    values: dict[str, FlagValue] = {flag.name: flag.default for flag in FLAGS}
    leftovers: list[str] = []
    errors: list[str] = []
    args = list(argv)
    for index, arg in enumerate(args):
        if arg == "--":
            leftovers.extend(args[index:])
            break
        matched = _match(arg)
        if matched is None:
            leftovers.append(arg)
            continue
        flag, text = matched
        try:
            values[flag.name] = True if text is None else _convert(flag, text)
        except FlagValueError as error:
            errors.append(str(error))
    return ParsedCommandLine(_options(values), leftovers, errors)


def _options(values: dict[str, FlagValue]) -> ServerOptions:
    """``ServerOptions`` of values each converted by its flag's type word (``_convert``), the
    field's type. Set one by one on the defaults while it is built (mypy cannot pair a name
    with its type in a ``**`` mapping, and an ``Any`` would hide every field from it)."""
    options = ServerOptions()
    for name, value in values.items():
        object.__setattr__(options, name, value)
    return options


def render_value(flag: Flag, value: FlagValue) -> str:
    """A value as TF Serving's usage text shows it (strings quoted, booleans lower case)."""
    if flag.type == "string":
        return f'"{value}"'
    if flag.type == "bool":
        return "true" if value else "false"
    if flag.type == "float":
        return f"{value:.6f}"
    return str(value)


def usage(program: str) -> str:
    """TF Serving's usage text: one line per flag with its default, type and help."""
    lines = [f"usage: {program}\nFlags:\n"]
    for flag in FLAGS:
        setting = f"--{flag.name}={render_value(flag, flag.default)}"
        lines.append(f"\t{setting:<33}\t{flag.type}\t{flag.help}\n")
    return "".join(lines)
