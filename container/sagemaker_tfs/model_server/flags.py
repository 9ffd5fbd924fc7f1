"""``tensorflow_model_server``'s command line, parsed into a typed ``ServerOptions``.

TF Serving uses absl-style flags: ``--flag=value`` or ``--flag value``; booleans also as a
bare ``--flag``. Unknown flags and inconsistent combinations are errors (``FlagError``),
reported before anything is loaded.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any


class FlagError(ValueError):
    """The command line is invalid; the message names the offending flag."""


@dataclasses.dataclass(frozen=True)
class ServerOptions:
    """Every flag the server understands, with TF Serving's defaults."""

    port: int = 8500
    grpc_socket_path: str = ""  # also serve gRPC on this UNIX socket (beside --port)
    rest_api_port: int = 0
    rest_api_num_threads: int = 0
    rest_api_timeout_in_ms: int = 30000
    model_config_file: str = ""
    model_name: str = "default"
    model_base_path: str = ""
    enable_batching: bool = False
    batching_parameters_file: str = ""
    tensorflow_intra_op_parallelism: int = 0
    tensorflow_inter_op_parallelism: int = 0
    per_process_gpu_memory_fraction: float = 0.0
    max_num_load_retries: int = 5
    load_retry_interval_micros: int = 60_000_000
    file_system_poll_wait_seconds: int = 1
    enable_model_warmup: bool = True
    grpc_max_message_bytes: int = 2**31 - 1  # TF Serving's (INT32_MAX): a 1 GB body fits


def _parse_bool(name: str, text: str) -> bool:
    lowered = text.lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise FlagError(f"Illegal value '{text}' specified for flag '{name}': expected true or false")


def _converter(field_type: str, name: str) -> Callable[[str], Any]:
    def convert(text: str) -> Any:
        try:
            if field_type == "int":
                return int(text)
            if field_type == "float":
                return float(text)
        except ValueError:
            raise FlagError(
                f"Illegal value '{text}' specified for flag '{name}': expected {field_type}"
            ) from None
        if field_type == "bool":
            return _parse_bool(name, text)
        return text

    return convert


_FIELDS = {field.name: str(field.type) for field in dataclasses.fields(ServerOptions)}


def _split_flag(arg: str) -> tuple[str, str | None]:
    body = arg.lstrip("-")
    if "=" in body:
        name, value = body.split("=", 1)
        return name, value
    return body, None


def parse_flags(argv: Sequence[str]) -> ServerOptions:
    """Parse ``argv`` (without the program name); raises ``FlagError`` on any problem."""
    values: dict[str, Any] = {}
    args = list(argv)
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        if not arg.startswith("-") or arg in ("-", "--"):
            raise FlagError(f"Unexpected positional argument: {arg}")
        name, value = _split_flag(arg)
        field_type = _FIELDS.get(name)
        if field_type is None:
            raise FlagError(f"Unknown command line flag '{name}'")
        if value is None:
            if field_type == "bool":
                value = "true"
            elif index < len(args):
                value = args[index]
                index += 1
            else:
                raise FlagError(f"Missing value for flag '{name}'")
        values[name] = _converter(field_type, name)(value)
    options = ServerOptions(**values)
    _validate(options)
    return options


def _validate(options: ServerOptions) -> None:
    if options.batching_parameters_file and not options.enable_batching:
        raise FlagError("--batching_parameters_file is set without setting --enable_batching")
    if options.model_config_file and options.model_base_path:
        raise FlagError(
            "--model_config_file and --model_base_path cannot both be set; "
            "put every model in the config file"
        )
    if not options.model_config_file and not options.model_base_path:
        raise FlagError("Both --model_base_path and --model_config_file are empty")
    for name in ("port", "rest_api_port"):
        port = getattr(options, name)
        if not 0 <= port <= 65535:
            raise FlagError(f"--{name}={port} is not a valid port")
    if options.port == 0:
        raise FlagError("--port must be set to a non-zero port for the gRPC server")
    if options.max_num_load_retries < 0:
        raise FlagError("--max_num_load_retries must not be negative")
