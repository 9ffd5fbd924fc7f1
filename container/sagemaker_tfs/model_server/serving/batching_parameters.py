"""TF Serving's batching parameters file (text-format ``BatchingParameters``), read and checked.

Unset fields take TF Serving's defaults; fields TF Serving accepts but that do not apply
here (thread pool name, large batch splitting) are ignored; anything else is an error.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from sagemaker_tfs.container_limits import stack_cpus


@dataclasses.dataclass(frozen=True)
class BatchingParameters:
    """The batching parameters file, with TF Serving's defaults for unset fields."""

    max_batch_size: int = 1000
    batch_timeout_micros: int = 0
    max_enqueued_batches: int = 10
    num_batch_threads: int = dataclasses.field(default_factory=stack_cpus)
    allowed_batch_sizes: tuple[int, ...] = ()
    pad_variable_length_inputs: bool = False

    def describe(self) -> str:
        return ", ".join(
            f"{field.name}: {getattr(self, field.name)}" for field in dataclasses.fields(self)
        )


_WRAPPED_FIELDS = {
    "max_batch_size",
    "batch_timeout_micros",
    "max_enqueued_batches",
    "num_batch_threads",
}
_IGNORED_FIELDS = {"thread_pool_name", "enable_large_batch_splitting", "max_execution_batch_size"}
_ENTRY = re.compile(
    r"\s*(?P<name>\w+)\s*(?:\{\s*value\s*:\s*(?P<wrapped>[^\s}]+)\s*\}|:\s*(?P<plain>[^\s{}]+))"
)


def parse_batching_parameters(text: str) -> BatchingParameters:
    """Parse text-format ``BatchingParameters``; raises ``ValueError`` with the problem."""
    text = re.sub(r"#[^\n]*", "", text)
    values: dict[str, object] = {}
    allowed: list[int] = []
    position = 0
    while text[position:].strip():
        match = _ENTRY.match(text, position)
        if match is None:
            snippet = text[position:].strip().splitlines()[0]
            raise ValueError(f"Invalid batching parameters near: {snippet!r}")
        position = match.end()
        name = match.group("name")
        raw = match.group("wrapped") or match.group("plain")
        if name in _WRAPPED_FIELDS:
            values[name] = _parse_int(name, raw)
        elif name == "allowed_batch_sizes":
            allowed.append(_parse_int(name, raw))
        elif name == "pad_variable_length_inputs":
            if raw.lower() not in ("true", "false"):
                raise ValueError(f"pad_variable_length_inputs must be true or false, got {raw}")
            values[name] = raw.lower() == "true"
        elif name not in _IGNORED_FIELDS:
            raise ValueError(f"Unknown field in batching parameters: {name}")
    parameters = BatchingParameters(allowed_batch_sizes=tuple(allowed), **values)  # type: ignore[arg-type]
    validate(parameters)
    return parameters


def _parse_int(name: str, raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {raw}") from None


def load_batching_parameters(path: str | None) -> BatchingParameters:
    """The parameters in ``path``, or all defaults when no file is given."""
    if not path:
        return BatchingParameters()
    return parse_batching_parameters(Path(path).read_text())


def validate(parameters: BatchingParameters) -> None:
    """TF Serving's checks, with its messages."""
    for name in ("max_batch_size", "num_batch_threads", "max_enqueued_batches"):
        if getattr(parameters, name) <= 0:
            raise ValueError(f"{name} must be positive; was {getattr(parameters, name)}")
    if parameters.batch_timeout_micros < 0:
        raise ValueError("batch_timeout_micros must be non-negative")
    sizes = parameters.allowed_batch_sizes
    if not sizes:
        return
    for previous, size in zip(sizes, sizes[1:], strict=False):
        if size <= previous:
            raise ValueError("allowed_batch_sizes entries must be monotonically increasing")
    if sizes[-1] != parameters.max_batch_size:
        raise ValueError(
            "Last entry in allowed_batch_sizes must match max_batch_size; last entry was "
            f"{sizes[-1]}; expected {parameters.max_batch_size}"
        )
