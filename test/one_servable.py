"""A model manager of one servable, for the tests that drive the Python model server's REST
API in process (``RestApi(OneServable(servable))``)."""

from __future__ import annotations

from typing import Any


class OneServable:
    """Answers every model name, version and label with the one servable it holds."""

    def __init__(self, servable: Any) -> None:
        self.servable = servable

    def get_servable(self, name: str, version: int | None, label: str | None) -> Any:
        return self.servable
