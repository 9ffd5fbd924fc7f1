"""The request headers the stack reads, each parsed by one function.

``Content-Type`` (:func:`media_type`), ``Accept`` (:func:`accept_list`), SageMaker's
``X-Amzn-SageMaker-Custom-Attributes`` (:func:`custom_attributes`) and its stateful
sessions' ``X-Amzn-SageMaker-Session-Id`` (:func:`session_id`). The service reads them once
per request (``service/request.py``), the Batch Transform driver reads content types
with the same function, and the njs (``nginx/tensorflow_serving.js``) has
twins of the first three, run against these on the cases of ``test/header_cases.py``.

The rules: a value loses HTTP's optional whitespace (spaces and tabs) around it and nothing
else; media types and parameter names are case-insensitive (lower-cased); parameters follow
``;``. An Accept list keeps the order in which the client listed its types (quality values
are not weighed, as the reference container did not weigh them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

CUSTOM_ATTRIBUTES_HEADER = "X-Amzn-SageMaker-Custom-Attributes"
TARGET_MODEL_HEADER = "X-Amzn-SageMaker-Target-Model"
# nginx -> the Python service (nginx/proxy_to_service.conf): "$msec $request_time", nginx's
# clock as it hands the request on and the seconds since the request's first byte.
ARRIVAL_HEADER = "X-SageMaker-TFS-Arrival"
# Stateful sessions: the request's session, and the answers that open and close one.
SESSION_HEADER = "X-Amzn-SageMaker-Session-Id"
NEW_SESSION_HEADER = "X-Amzn-SageMaker-New-Session-Id"
CLOSED_SESSION_HEADER = "X-Amzn-SageMaker-Closed-Session-Id"
OPTIONAL_WHITESPACE = " \t"
MODEL_NAME_ATTRIBUTE = "tfs-model-name"
MODEL_VERSION_ATTRIBUTE = "tfs-model-version"
METHOD_ATTRIBUTE = "tfs-method"
OUTPUT_FILTER_ATTRIBUTE = "tfs-output-filter"
_ATTRIBUTES = (
    MODEL_NAME_ATTRIBUTE,
    MODEL_VERSION_ATTRIBUTE,
    METHOD_ATTRIBUTE,
    OUTPUT_FILTER_ATTRIBUTE,
)


def strip_optional_whitespace(text: str) -> str:
    """``text`` without the spaces and tabs around it."""
    return text.strip(OPTIONAL_WHITESPACE)


@dataclass(frozen=True)
class MediaType:
    """``type/subtype`` in lower case ('' when the header is absent or empty) and its
    parameters (names in lower case, values as sent, without quotes)."""

    name: str
    parameters: tuple[tuple[str, str], ...] = ()

    def parameter(self, name: str) -> str | None:
        return next((value for key, value in self.parameters if key == name), None)


def media_type(header: str | None) -> MediaType:
    """``Application/JSON; charset="utf-8"`` -> ``MediaType("application/json",
    (("charset", "utf-8"),))``."""
    name, *parameters = (header or "").split(";")
    pairs = []
    for parameter in parameters:
        key, sep, value = parameter.partition("=")
        key = strip_optional_whitespace(key).lower()
        if sep and key:
            value = strip_optional_whitespace(value)
            if len(value) >= 2 and value[0] == value[-1] == '"':
                value = value[1:-1]
            pairs.append((key, value))
    return MediaType(strip_optional_whitespace(name).lower(), tuple(pairs))


def accept_list(header: str | None) -> tuple[MediaType, ...]:
    """The media types of an Accept header, in the order listed (empty entries dropped)."""
    types = (media_type(entry) for entry in (header or "").split(","))
    return tuple(entry for entry in types if entry.name)


@dataclass(frozen=True)
class CustomAttributes:
    """What the stack reads of the custom attributes: ``tfs-model-name=NAME``,
    ``tfs-model-version=N``, ``tfs-method=M`` and ``tfs-output-filter=A;B`` (other text is
    the user's, passed on untouched in ``header``). A key given twice: the last one counts."""

    header: str = ""
    model_name: str | None = None
    model_version: str | None = None
    method: str | None = None
    output_filter: tuple[str, ...] = ()


def custom_attributes(header: str | None) -> CustomAttributes:
    """Comma-separated ``key=value`` pairs; keys and values trimmed of spaces and tabs."""
    found: dict[str, str] = {}
    for pair in (header or "").split(","):
        key, sep, value = pair.partition("=")
        key = strip_optional_whitespace(key)
        if sep and key in _ATTRIBUTES:
            found[key] = strip_optional_whitespace(value)
    names = found.get(OUTPUT_FILTER_ATTRIBUTE, "").split(";")
    return CustomAttributes(
        header=header or "",
        model_name=found.get(MODEL_NAME_ATTRIBUTE),
        model_version=found.get(MODEL_VERSION_ATTRIBUTE),
        method=found.get(METHOD_ATTRIBUTE),
        output_filter=tuple(
            strip_optional_whitespace(name) for name in names if strip_optional_whitespace(name)
        ),
    )


def arrival_time(value: str | None) -> float | None:
    """When the request reached nginx (seconds since the epoch) from ``ARRIVAL_HEADER``; None
    when absent or unreadable (the request is then not checked against its deadline)."""
    parts = (value or "").split()
    if len(parts) != 2:
        return None
    try:
        sent, waited = float(parts[0]), float(parts[1])
    except ValueError:
        return None
    arrival = sent - waited
    return arrival if math.isfinite(arrival) else None


def session_id(header: str | None) -> str | None:
    """The session a request names, trimmed; None when the header is absent or empty."""
    value = strip_optional_whitespace(header or "")
    return value or None
