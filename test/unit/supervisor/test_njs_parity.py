"""The njs agrees with the Python service on the same inputs.

nginx runs ``tensorflow_serving.js`` for single-model invocations without user code; the
Python service does the same work for multi-model endpoints and for what njs hands over.
Each rule written in both languages is run here by both on the same cases: the
JSON/JSON lines/CSV conversion (docs/contract.md's table: the same request byte for byte, or
the same error status, on the hand-written cases, a corpus of the shapes TF Serving's REST API
takes and a seeded fuzzer of bodies, test/njs_corpus.py), the one-line JSON answer's type for
an Accept header (also run under nginx in test/integration/stack/test_versions_and_accept.py),
the headers' parsers (``wire/http_headers.py``: Content-Type, Accept, the custom attributes),
the model name pattern and the version rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from conversion_cases import ACCEPT_CASES, CASES
from header_cases import ACCEPT_HEADERS, CONTENT_TYPES, CUSTOM_ATTRIBUTES
from njs_corpus import CSV, fuzzed_bodies, loose_number_rows, shape_bodies
from njs_functions import call_njs, needs_node
from sagemaker_tfs.model_discovery import MODEL_NAME_PATTERN
from sagemaker_tfs.service.codecs.content_types import one_line_json_type
from sagemaker_tfs.service.codecs.text.text_rest import convert
from sagemaker_tfs.service.targets import valid_version
from sagemaker_tfs.wire.errors import HttpError
from sagemaker_tfs.wire.http_headers import (
    METHOD_ATTRIBUTE,
    MODEL_NAME_ATTRIBUTE,
    MODEL_VERSION_ATTRIBUTE,
    accept_list,
    custom_attributes,
    media_type,
)

MODEL_NAMES = [
    "m",
    "half_plus_two",
    "model.v2-final",
    "0",
    "A" * 200,
    "a..b",
    "",
    "_private",
    ".hidden",
    "-dash",
    "a b",
    "a/b",
    "../etc",
    "model\n",
    "model\r\n",
    "\nmodel",
    "mödel",
    "模型",
    "a\u0000",
    "a%2Fb",
    "a:predict",
]

VERSIONS = ["1", "0", "007", "9223372036854775807", "9223372036854775808", "1" * 20, "", "-1",
            "1.0", " 1", "1\n", "١"]  # fmt: skip


FUZZED_BODIES = 3000
FUZZ_SEED = 53


def run_python_convert(content_type: str, body: str) -> dict:
    try:
        return {"value": convert(content_type, body.encode())}
    except HttpError as error:
        return {"status": error.status, "message": error.message}


def converted_alike(njs: dict, python: dict) -> bool:
    """The same request, byte for byte, or a refusal with the same status; or the njs hands
    the body to the Python service, which converts it (then it is the service's request)."""
    if "handOver" in njs:
        return True
    if "value" in python:
        return njs.get("value") == python["value"]
    return "value" not in njs and njs.get("status") == python["status"]


def compared(tmp_path: Path, cases: Sequence[tuple[str, str]]) -> tuple[list[str], int]:
    """The cases the njs and the Python service convert differently, described, and how many
    the njs hands over."""
    njs_results = call_njs(tmp_path, "convert", cases)
    found = [
        f"{content_type} {body!r}: njs {njs} python {python}"[:400]
        for (content_type, body), njs in zip(cases, njs_results, strict=True)
        if not converted_alike(njs, python := run_python_convert(content_type, body))
    ]
    return found, sum("handOver" in njs for njs in njs_results)


@needs_node
def test_njs_and_python_convert_alike(tmp_path: Path) -> None:
    assert compared(tmp_path, CASES) == ([], 0)


@needs_node
def test_njs_and_python_convert_every_shape_alike(tmp_path: Path) -> None:
    """Bodies of every shape: one value a line, many columns, named inputs, two inputs, JSON
    lines, negative zeros, NaN, strings, b64, integers with a point, ragged lists, empty."""
    cases = shape_bodies()
    assert len(cases) > 40
    assert compared(tmp_path, cases) == ([], 1)  # +1e400: beyond a double's range


@needs_node
def test_njs_and_python_convert_fuzzed_bodies_alike(tmp_path: Path) -> None:
    cases = fuzzed_bodies(FUZZED_BODIES, FUZZ_SEED)
    converted = sum("value" in run_python_convert(*case) for case in cases)
    assert FUZZED_BODIES / 5 < converted < FUZZED_BODIES * 4 / 5  # both ways well covered
    found, handed_over = compared(tmp_path, cases)
    assert found == [], f"{len(found)} of {len(cases)}: {found[:5]}"
    assert handed_over < FUZZED_BODIES / 20


@needs_node
def test_njs_writes_loose_csv_numbers_as_python_does(tmp_path: Path) -> None:
    """+1.5, .5, 1., 007, -0012.50e1...: Python's repr of the float (or the integer), written
    by the njs from the text, not from its own float (njs 0.7.9's parsing and printing are
    not always correctly rounded or shortest)."""
    cases = loose_number_rows(3000, FUZZ_SEED)
    found, handed_over = compared(tmp_path, cases)
    assert found == [], f"{len(found)} of {len(cases)}: {found[:5]}"
    assert handed_over < len(cases) / 2  # the rows with a number beyond a double's range


@needs_node
def test_njs_hands_over_csv_numbers_it_cannot_write_exactly(tmp_path: Path) -> None:
    """More than 15 significant digits, or beyond normal doubles: the service converts."""
    cases = [(CSV, "+12345678901234567.5\n"), (CSV, "1,.1234567890123456\n"),
             (CSV, "+1e400\n"), (CSV, "+1.5e-320\n")]  # fmt: skip
    assert [list(result) for result in call_njs(tmp_path, "convert", cases)] == [
        ["handOver"]
    ] * len(cases)
    kept = [(CSV, "+123456789012345.0\n"), (CSV, "+1.5e-300\n"), (CSV, "1.E+300\n")]
    assert compared(tmp_path, kept) == ([], 0)


def routing_attributes(header: str) -> dict[str, str]:
    """The three routing attributes Python reads in ``header``, by key, as the njs gives them."""
    parsed = custom_attributes(header)
    given = {
        MODEL_NAME_ATTRIBUTE: parsed.model_name,
        MODEL_VERSION_ATTRIBUTE: parsed.model_version,
        METHOD_ATTRIBUTE: parsed.method,
    }
    return {key: value for key, value in given.items() if value is not None}


@needs_node
def test_njs_and_python_read_custom_attributes_alike(tmp_path: Path) -> None:
    njs = call_njs(tmp_path, "parseCustomAttributes", [[header] for header in CUSTOM_ATTRIBUTES])
    python = [{"value": routing_attributes(header)} for header in CUSTOM_ATTRIBUTES]
    assert dict(zip(CUSTOM_ATTRIBUTES, njs, strict=True)) == dict(
        zip(CUSTOM_ATTRIBUTES, python, strict=True)
    )


@needs_node
def test_njs_and_python_read_content_types_alike(tmp_path: Path) -> None:
    njs = [
        result["value"] for result in call_njs(tmp_path, "mediaType", [[h] for h in CONTENT_TYPES])
    ]
    python = [media_type(header).name for header in CONTENT_TYPES]
    assert dict(zip(CONTENT_TYPES, njs, strict=True)) == dict(
        zip(CONTENT_TYPES, python, strict=True)
    )


@needs_node
def test_njs_and_python_read_accept_headers_alike(tmp_path: Path) -> None:
    cases = [[header] for header in ACCEPT_HEADERS]
    python = [[entry.name for entry in accept_list(header)] for header in ACCEPT_HEADERS]
    njs = [result["value"] for result in call_njs(tmp_path, "acceptList", cases)]
    assert dict(zip(ACCEPT_HEADERS, njs, strict=True)) == dict(
        zip(ACCEPT_HEADERS, python, strict=True)
    )
    first = [result["value"] for result in call_njs(tmp_path, "firstAccept", cases)]
    assert first == [types[0] if types else "" for types in python]


@needs_node
def test_njs_and_python_accept_the_same_model_names(tmp_path: Path) -> None:
    njs = [
        result["value"] for result in call_njs(tmp_path, "MODEL_NAME", [[n] for n in MODEL_NAMES])
    ]
    python = [MODEL_NAME_PATTERN.fullmatch(name) is not None for name in MODEL_NAMES]
    assert dict(zip(MODEL_NAMES, njs, strict=True)) == dict(zip(MODEL_NAMES, python, strict=True))
    assert python[:6] == [True] * 6 and not any(python[6:])  # the list is what it says


@needs_node
def test_njs_and_python_accept_the_same_versions(tmp_path: Path) -> None:
    njs = [
        result["value"] for result in call_njs(tmp_path, "validVersion", [[v] for v in VERSIONS])
    ]
    python = [valid_version(version) for version in VERSIONS]
    assert dict(zip(VERSIONS, njs, strict=True)) == dict(zip(VERSIONS, python, strict=True))


@needs_node
def test_njs_and_python_pick_the_same_one_line_type(tmp_path: Path) -> None:
    accepts = [accept for accept, _ in ACCEPT_CASES]
    njs = [
        result["value"] for result in call_njs(tmp_path, "oneLineJsonType", [[a] for a in accepts])
    ]
    assert njs == [one_line_json_type(accept_list(accept)) for accept in accepts]
