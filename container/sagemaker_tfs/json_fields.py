"""Typed reads of a JSON document's fields (``StackConfig.from_dict``): each read checks the
value's type and raises ``ValueError`` naming the field, so nothing untyped reaches a
dataclass."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, TypeVar

from sagemaker_tfs.settings import BatchingConfig

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

Settings = TypeVar("Settings", bound="DataclassInstance")
T = TypeVar("T")


class JsonObject:
    """One JSON object, and where in the document it is (for the error messages)."""

    def __init__(self, fields: Mapping[str, object], where: str) -> None:
        self._fields = fields
        self._where = where

    @classmethod
    def of(cls, value: object, where: str) -> JsonObject:
        if not isinstance(value, Mapping):
            raise ValueError(f"{where} must be a JSON object, got {type(value).__name__}")
        return cls({str(key): item for key, item in value.items()}, where)

    def __contains__(self, name: str) -> bool:
        return name in self._fields

    def _value(self, name: str) -> object:
        if name not in self._fields:
            raise ValueError(f"{self._where}.{name} is missing")
        return self._fields[name]

    def _wrong(self, name: str, kind: str) -> ValueError:
        found = type(self._fields[name]).__name__
        return ValueError(f"{self._where}.{name} must be {kind}, got {found}")

    def _typed(self, name: str, kind: str, *types: type[T]) -> T:
        """The value if it is one of ``types``; a JSON true or false is no number."""
        value = self._value(name)
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise self._wrong(name, kind)
        return value

    def string(self, name: str) -> str:
        return self._typed(name, "a string", str)

    def optional_string(self, name: str) -> str | None:
        return None if self._value(name) is None else self.string(name)

    def integer(self, name: str) -> int:
        return self._typed(name, "an integer", int)

    def optional_integer(self, name: str) -> int | None:
        return None if self._value(name) is None else self.integer(name)

    def number(self, name: str) -> float:
        return float(self._typed(name, "a number", int, float))

    def optional_number(self, name: str) -> float | None:
        return None if self._value(name) is None else self.number(name)

    def boolean(self, name: str) -> bool:
        return self._typed(name, "true or false", bool)

    def child(self, name: str) -> JsonObject:
        return JsonObject.of(self._value(name), f"{self._where}.{name}")

    def optional_child(self, name: str) -> JsonObject | None:
        return None if self._value(name) is None else self.child(name)

    def optional_batching(self, name: str) -> BatchingConfig | None:
        child = self.optional_child(name)
        return None if child is None else child.settings(BatchingConfig)

    def _list(self, name: str) -> list[object]:
        value = self._value(name)
        if not isinstance(value, list):
            raise self._wrong(name, "a list")
        return value

    def children(self, name: str) -> tuple[JsonObject, ...]:
        return tuple(
            JsonObject.of(item, f"{self._where}.{name}[{index}]")
            for index, item in enumerate(self._list(name))
        )

    def integers(self, name: str) -> tuple[int, ...]:
        numbers: list[int] = []
        for index, value in enumerate(self._list(name)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"{self._where}.{name}[{index}] must be an integer")
            numbers.append(value)
        return tuple(numbers)

    def settings(self, kind: type[Settings]) -> Settings:
        """A frozen settings dataclass whose fields are all strings, integers, numbers,
        booleans or batching parameters (each maybe None), read field by field by its
        annotation."""
        read = {field.name: _READERS[str(field.type)] for field in dataclasses.fields(kind)}
        return kind(**{name: reader(self, name) for name, reader in read.items()})


# A field's annotation (a string: the settings modules use ``from __future__ import
# annotations``) -> the read that checks its JSON value.
_READERS: dict[str, Callable[[JsonObject, str], object]] = {
    "str": JsonObject.string,
    "str | None": JsonObject.optional_string,
    "int": JsonObject.integer,
    "int | None": JsonObject.optional_integer,
    "float": JsonObject.number,
    "float | None": JsonObject.optional_number,
    "bool": JsonObject.boolean,
    "BatchingConfig | None": JsonObject.optional_batching,
}
