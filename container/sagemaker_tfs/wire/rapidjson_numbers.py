"""JSON numbers read as TF Serving's rapidjson reads them, for both sides of the REST API:
the model server's reader (``model_server/rest/json_reader.py``) and the service's REST rules
for bodies it reads itself (``service/codecs/text/text_request_rules.py``).

An integer beyond int64/uint64 becomes a double (as in orjson too); a number beyond a double's
range refuses the whole document (``NumberTooBig``).
"""

from __future__ import annotations

import json
import math


class NumberTooBig(ValueError):
    """A number beyond a double's range, as written: rapidjson refuses the whole document."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


def _integer(text: str) -> int | float:
    """Long integers are read as doubles from the text: Python refuses int() of over 4,300
    digits."""
    if len(text.lstrip("-")) <= 20 and -(2**63) <= (value := int(text)) < 2**64:
        return value
    return _double(text)


def _double(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise NumberTooBig(text)
    return value


REST_NUMBERS = json.JSONDecoder(parse_int=_integer, parse_float=_double)
