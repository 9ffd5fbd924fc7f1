"""Typed reads of environment variables for ``config.py``: every error names the variable and
its value (``ConfigError``, which ``serve`` turns into exit code 2)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TypeVar

T = TypeVar("T")


class ConfigError(ValueError):
    """An environment variable or option has a value the stack cannot run with."""


class EnvReader:
    """Typed reads from the environment; every error names the variable and its value."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._environ = environ

    def raw(self, name: str) -> str | None:
        value = self._environ.get(name)
        if value is None or value.strip() == "":
            return None
        return value.strip()

    def string(self, name: str, default: str) -> str:
        value = self.raw(name)
        return default if value is None else value

    def boolean(self, name: str, default: bool) -> bool:
        value = self.raw(name)
        if value is None:
            return default
        lowered = value.lower()
        if lowered not in ("true", "false"):
            raise ConfigError(f"{name} must be 'true' or 'false', got {value!r}")
        return lowered == "true"

    def _parsed(self, name: str, parse: Callable[[str], T], kind: str) -> T | None:
        """``parse`` of the variable's value, None where it is unset; ConfigError naming
        ``kind`` where ``parse`` raises ValueError."""
        value = self.raw(name)
        try:
            return None if value is None else parse(value)
        except ValueError:
            raise ConfigError(f"{name} must be {kind}, got {value!r}") from None

    def integer(self, name: str, default: int | None, minimum: int = 1) -> int | None:
        number = self._parsed(name, int, "an integer")
        if number is None:
            return default
        if number < minimum:
            kind = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
            raise ConfigError(f"{name} must be {kind}, got {self.raw(name)!r}")
        return number

    def required_integer(self, name: str, default: int, minimum: int = 1) -> int:
        value = self.integer(name, default, minimum)
        assert value is not None
        return value

    def choice(self, name: str, default: str, choices: tuple[str, ...]) -> str:
        value = self.raw(name)
        if value is None:
            return default
        if value not in choices:
            raise ConfigError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
        return value

    def finite(self, name: str, default: float) -> float:
        number = self._parsed(name, float, "a number")
        if number is None:
            return default
        if not math.isfinite(number):
            raise ConfigError(f"{name} must be a finite number, got {self.raw(name)!r}")
        return number

    def fraction(self, name: str, default: float) -> float:
        number = self.finite(name, default)
        if not 0.0 <= number < 1.0:
            raise ConfigError(f"{name} must be >= 0 and < 1, got {self.raw(name)!r}")
        return number
