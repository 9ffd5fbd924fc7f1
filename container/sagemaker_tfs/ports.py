"""The stack's TCP ports: ``SAGEMAKER_SAFE_PORT_RANGE`` and port numbers parsed, the model
servers' ports allocated, and whether a port is free (the supervisor's per-model ports, the
transform driver's range for its stack)."""

from __future__ import annotations

import itertools
import re
import socket
from dataclasses import dataclass

from sagemaker_tfs.env_reader import ConfigError

DEFAULT_GRPC_PORT = 9000
DEFAULT_REST_PORT = 8501


@dataclass(frozen=True)
class Instance:
    """The two ports of one model server process."""

    grpc_port: int
    rest_port: int


@dataclass(frozen=True)
class PortRange:
    """``SAGEMAKER_SAFE_PORT_RANGE``: internal ports must be taken from ``low..high``."""

    low: int
    high: int

    def ports(self) -> range:
        return range(self.low, self.high + 1)


def parse_port(name: str, value: str | int) -> int:
    try:
        port = int(value)
    except ValueError:
        raise ConfigError(f"{name} must be a port number, got {value!r}") from None
    if not 1 <= port <= 65535:
        raise ConfigError(f"{name} must be a port number between 1 and 65535, got {value!r}")
    return port


def parse_port_range(value: str) -> PortRange:
    """``LOW-HIGH`` -> ``PortRange``; the variable's name is in every error."""
    name = "SAGEMAKER_SAFE_PORT_RANGE"
    match = re.fullmatch(r"\s*(\d+)\s*-\s*(\d+)\s*", value)
    if match is None:
        raise ConfigError(f"{name} must look like LOW-HIGH (e.g. 9000-9999), got {value!r}")
    low, high = parse_port(name, match.group(1)), parse_port(name, match.group(2))
    if low > high:
        raise ConfigError(f"{name} must have LOW <= HIGH, got {value!r}")
    return PortRange(low, high)


def allocate_instances(
    count: int, port_range: PortRange | None, public_port: int
) -> tuple[Instance, ...]:
    """Ports for ``count`` model servers: fixed defaults, or taken in order from the range.
    Either way never the public port: ``SAGEMAKER_BIND_TO_PORT=8501`` (what the SDK v3's local
    container publishes) moves the first REST port to 8503."""
    if port_range is None:
        grpc_ports = _default_ports(DEFAULT_GRPC_PORT, count, public_port)
        rest_ports = _default_ports(DEFAULT_REST_PORT, count, public_port)
        return tuple(
            Instance(grpc, rest) for grpc, rest in zip(grpc_ports, rest_ports, strict=True)
        )
    ports = [p for p in port_range.ports() if p != public_port]
    if len(ports) < 2 * count:
        raise ConfigError(
            f"SAGEMAKER_SAFE_PORT_RANGE={port_range.low}-{port_range.high} has room for "
            f"{len(ports) // 2} model server(s), SAGEMAKER_TFS_INSTANCE_COUNT asks for {count}"
        )
    return tuple(Instance(ports[2 * i], ports[2 * i + 1]) for i in range(count))


def _default_ports(first: int, count: int, public_port: int) -> list[int]:
    """``count`` ports from ``first`` in steps of two (gRPC even, REST odd: the two series never
    meet), passing over the public port."""
    ports = (port for port in itertools.count(first, 2) if port != public_port)
    return list(itertools.islice(ports, count))


def port_is_free(port: int) -> bool:
    """Nothing is bound to ``port`` on 127.0.0.1 (so a child can listen there)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
