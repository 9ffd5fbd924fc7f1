"""JSON and CSV bodies that the service sends over gRPC get the REST path's answer, byte for byte.

Without ``inference.py``, the service reads a numeric JSON or CSV body straight into the input's
array and sends it over gRPC (``text_predict``); it must answer what converting the body and
posting it to the model server's REST API answers (``text_rest.convert``, what it did before
and still does for bodies it does not read). Here both run against the same real model server
in a whole stack (nginx, gunicorn, the Python model server): the stack's answer is compared
with the answer of the model server's REST port to the converted body, after the one-line rule
the service applies for a JSON Accept. Status, Content-Type and every byte must match, for
small bodies (a multi-model endpoint, where the service converts every size) and bodies over
the njs limit (single model), good and bad. The model server's metrics show which of its
front ends (gRPC or REST) answered, so that a silent fall back to REST cannot pass for the new
path.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import requests
from control_socket import load
from conversion_cases import ACCEPT_CASES, BAD_BODIES, CASES
from rest_parity import answered_by, requests_counted, rest_answer, stack_answer
from sagemaker_tfs.service.codecs.registry import answer_type
from sagemaker_tfs.wire.http_headers import accept_list
from whole_stack import Stack, running_stack

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

CSV = "text/csv"
JSON = "application/json"
MODEL = "half_plus_three"
TWO_INPUTS = "two_inputs"
INTEGERS = "int_doubler"
DTYPE_ECHO = "dtype_echo"
MIXED = "mixed_inputs"
JSON_LINES = "application/jsonlines"


def assert_same_answers(
    stack: Stack, path: str, content_type: str, body: bytes, accept: str | None, model: str = MODEL
) -> tuple[int, str, bytes]:
    by_stack = stack_answer(stack, path, content_type, body, accept)
    by_rest = rest_answer(stack, f"/v1/models/{model}:predict", content_type, body, accept)
    assert by_stack == by_rest, (body[:100], by_stack[:2], by_stack[2][:300], by_rest[2][:300])
    return by_stack


@pytest.fixture(scope="module")
def multi_model(
    tmp_path_factory: pytest.TempPathFactory, resources_dir: Path, test_models: Any
) -> Iterator[Stack]:
    """half_plus_three, mobilenet_v2 (its convolutions refuse a matrix), two_inputs
    (y = 2a + b; signature ``doubled``: 2a), int_doubler (int64 n -> 2n) and dtype_echo
    (x -> x, a signature per dtype) and mixed_inputs (float a -> 2a, int64 b -> 2b)."""
    root = tmp_path_factory.mktemp("text_predict_mme")
    shutil.copytree(resources_dir / "models" / MODEL, root / "models" / MODEL)
    for name in ("mobilenet_v2", TWO_INPUTS, INTEGERS, DTYPE_ECHO, MIXED):
        shutil.copytree(test_models(name), root / "models" / name)
    (root / "work").mkdir()
    with running_stack(root / "models", root / "work", multi_model=True) as stack:
        for name in (MODEL, "mobilenet_v2", TWO_INPUTS, INTEGERS, DTYPE_ECHO, MIXED):
            status, answer = load(stack, name, name)
            assert status == 200, answer
        yield stack


@pytest.fixture(scope="module")
def single_model(tmp_path_factory: pytest.TempPathFactory, resources_dir: Path) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("text_predict")
    with running_stack(resources_dir / "models", root) as stack:
        yield stack


INVOKE = f"/models/{MODEL}/invoke"
SMALL_NUMERIC = [
    (CSV, b"1.0,2.0\n3.0,4.0\n"),
    (CSV, b"0.1\n-2.5e3\n7\n"),
    (CSV, b"16777217,1e-45,3.4028234e38\r\n0.30000000000000004,-1.5,2\r\n"),
    (JSON, b'{"instances": [1.0, 2.0, 5e-8]}'),
    (JSON, b'{"inputs": [[1.5, 2], [3, 4]]}'),
    (JSON, b'{"inputs": 1.5}'),
    (JSON, b"[[1, -0.0], [0.1, 1e30]]"),
    (JSON, b"[1.0, 2.0]"),
    (JSON, b"[[[0.25], [1]], [[2], [3]]]"),
    (JSON, b'{"instances": [NaN, Infinity, -Infinity, 1.5]}'),  # since issue 53's second part
    (JSON, b"[[NaN, 1e39], [-Infinity, -0.0]]"),  # 1e39: a float32's infinity
    ("application/jsonlines", b"[NaN, 1]\n[Infinity, -Infinity]\n"),
]


@pytest.mark.parametrize(("content_type", "body"), SMALL_NUMERIC)
@pytest.mark.parametrize("accept", [None, "application/json", "application/jsonlines", "*/*"])
def test_small_numeric_bodies_over_grpc(multi_model: Stack, content_type: str, body: bytes,
                                        accept: str | None) -> None:  # fmt: skip
    grpc_before = answered_by(multi_model, "GRPC")
    status, _, _ = assert_same_answers(multi_model, INVOKE, content_type, body, accept)
    assert status == 200
    read_here = body != b'{"inputs": 1.5}'  # a scalar is not a list: the REST path's
    assert answered_by(multi_model, "GRPC") == grpc_before + read_here


NAMED_BODIES = [  # to two_inputs; over gRPC since issue 53
    (JSON, b'{"instances": [{"a": 1.0, "b": 2.0}, {"a": -0.0, "b": 0.5}]}'),
    (JSON, b'{"instances": [{"b": [1, 2], "a": [3, 4]}, {"b": [5, 6], "a": [7, 8]}]}'),
    (JSON, b'{"inputs": {"a": [1.5, 2.5], "b": [-1, 1e-3]}}'),
    (JSON, b'{"inputs": {"a": 1.5, "b": 2}}'),
    (JSON, b'{"signature_name": "doubled", "instances": [1.0, 2.5]}'),
    (JSON, b'{"inputs": [[1.0], [2.5]], "signature_name": "doubled"}'),
    (JSON, b'{"signature_name": "doubled", "inputs": {"a": [[1.0, 2.0]]}}'),
    (JSON_LINES, b'{"a": 1.5, "b": 2}\n{"a": 3, "b": -4e3}\n'),
    (JSON_LINES, b'{"a": [1, 2], "b": [3, 4]}\r\n{"a": [5, 6], "b": [7, 8]}'),
    (JSON, b'{"inputs": {"a": [NaN, Infinity], "b": [-Infinity, 1]}}'),
    (JSON_LINES, b'{"a": NaN, "b": 1}\n{"a": -Infinity, "b": Infinity}\n'),
]
NAMED_BODIES_REFUSED = [  # the REST path's errors, word for word
    (JSON, b'{"instances": [{"a": 1.0}, {"a": 2.0}]}'),
    (JSON, b'{"instances": [1.0, 2.0]}'),
    (JSON, b'{"inputs": {"a": [1.0, 2.0], "b": [1.0, 2.0, 3.0]}}'),  # the model refuses it
    (JSON, b'{"signature_name": "none", "instances": [1.0]}'),
    (JSON_LINES, b'{"a": 1, "b": 2}\n{"a": 3}'),
    (JSON, b'{"inputs": {"a": [-NaN], "b": [1]}}'),  # spellings the REST path refuses
    (JSON, b'{"inputs": {"a": [Inf], "b": [1]}}'),
]


@pytest.mark.parametrize(("content_type", "body"), NAMED_BODIES)
@pytest.mark.parametrize("accept", [None, "application/jsonlines"])
def test_named_inputs_and_signatures_over_grpc(
    multi_model: Stack, content_type: str, body: bytes, accept: str | None
) -> None:
    """Named inputs (rows, columns, JSON lines), two inputs and ``signature_name``: read by
    the bounded reader and sent over gRPC (issue 53), with the REST path's bytes."""
    grpc_before = answered_by(multi_model, "GRPC")
    status, _, _ = assert_same_answers(multi_model, f"/models/{TWO_INPUTS}/invoke", content_type,
                                       body, accept, TWO_INPUTS)  # fmt: skip
    assert status == 200
    assert answered_by(multi_model, "GRPC") == grpc_before + 1


@pytest.mark.parametrize(("content_type", "body"), NAMED_BODIES_REFUSED)
def test_named_inputs_refused_alike(multi_model: Stack, content_type: str, body: bytes) -> None:
    status, _, _ = assert_same_answers(multi_model, f"/models/{TWO_INPUTS}/invoke", content_type,
                                       body, None, TWO_INPUTS)  # fmt: skip
    assert status == 400


INTEGER_BODIES_REFUSED = [  # an integer input given another number: refused by the service
    (JSON, b'{"instances": [1, 2.0, 3]}'),
    (JSON, b"[[1, 2], [3, 4.5]]"),
    (JSON, b'{"inputs": {"n": [[1, -0.0]]}}'),
    (JSON, b'{"instances": [{"n": 1}, {"n": 1e2}]}'),
    (JSON, b'{"inputs": [1, NaN, 2.5]}'),
    (JSON, b'{"instances": [1, 12345678901234567890.0]}'),
    (JSON_LINES, b'{"n": [1, 2]}\n{"n": [3, Infinity]}\n'),
    (CSV, b"1\n2.5\n3\n"),  # CSV since issue 53's fourth part
    (CSV, b"1,2\r\n\r\n3,4e0\r\n"),
    (CSV, b"7\n12345678901234567890\n"),
]


@pytest.mark.parametrize(("content_type", "body"), INTEGER_BODIES_REFUSED)
@pytest.mark.parametrize("accept", [None, "application/jsonlines"])
def test_integer_inputs_given_other_numbers_refused_alike(
    multi_model: Stack, content_type: str, body: bytes, accept: str | None
) -> None:
    """The REST path's 400 and message, word for word, without the REST path: the model
    server counts no request for it, by either front end (issue 53)."""
    before = requests_counted(multi_model, INTEGERS)
    status, _, _ = assert_same_answers(multi_model, f"/models/{INTEGERS}/invoke", content_type,
                                       body, accept, INTEGERS)  # fmt: skip
    assert status == 400
    assert requests_counted(multi_model, INTEGERS) == before + 1  # the parity's own REST post


@pytest.mark.parametrize(
    ("content_type", "body"),
    [(JSON, b'{"instances": [1, -2, 3]}'), (JSON, b'{"inputs": {"n": [[-0, 9007199254740993]]}}'),
     (JSON_LINES, b'{"n": [1, 2]}\n{"n": [3, 4]}\n'), (CSV, b"1,2\n-0,4\n")],
)  # fmt: skip
def test_integer_inputs_over_grpc(multi_model: Stack, content_type: str, body: bytes) -> None:
    grpc_before = answered_by(multi_model, "GRPC")
    status, _, _ = assert_same_answers(multi_model, f"/models/{INTEGERS}/invoke", content_type,
                                       body, None, INTEGERS)  # fmt: skip
    assert status == 200
    assert answered_by(multi_model, "GRPC") == grpc_before + 1


RAGGED_BODIES = [
    b"[[1, 2], [3]]",
    b"[[1, 2], 3]",
    b'{"instances": [1, [2]]}',
    b'{"inputs": [[[1], [2]], [[3], [4, 5]]]}',
    b'{"instances": [[0.5, 0.5], [[2], [3]]]}',
    b'{"instances": [' + b"[1.5, 2.5], " * 40_000 + b"[3.5]]}",  # 480 KB
]


@pytest.mark.parametrize("body", RAGGED_BODIES, ids=lambda body: body[:40].decode())
def test_ragged_lists_refused_alike(multi_model: Stack, body: bytes) -> None:
    """The REST path's 400 and words for a ragged list, from the service: the model server
    counts no request for it but the parity's own REST post (issue 53)."""
    before = requests_counted(multi_model, MODEL)
    status, _, _ = assert_same_answers(multi_model, INVOKE, JSON, body, None)
    assert status == 400
    assert requests_counted(multi_model, MODEL) == before + 1


STRING_BODIES = [  # to dtype_echo's default signature: a string x -> y = x
    b'{"instances": ["a", "b\\u00e9", ""]}',
    b'{"inputs": [["x", {"b64": "aGk="}], [{"b64": "/w=="}, "\\ud83d\\ude00"]]}',
    b'["a", "b"]',
    b'{"instances": [{"x": "a"}, {"x": {"b64": "_-8="}}]}',
    b'{"instances": [' + b'"abc,\\"def", ' * 40_000 + b'"end"]}',  # 560 KB
]


@pytest.mark.parametrize("body", STRING_BODIES, ids=lambda body: body[:40].decode())
def test_strings_go_the_rest_way(multi_model: Stack, body: bytes) -> None:
    """Strings and b64 objects for a string input: the REST path's bytes, the REST way (over
    gRPC the stack held more memory: issue 53, docs/performance.md)."""
    grpc_before = answered_by(multi_model, "GRPC")
    status, _, _ = assert_same_answers(multi_model, f"/models/{DTYPE_ECHO}/invoke", JSON, body,
                                       None, DTYPE_ECHO)  # fmt: skip
    assert status == 200
    assert answered_by(multi_model, "GRPC") == grpc_before


OTHER_DTYPES = ["int8", "int16", "uint8", "uint16", "uint32", "half"]
OTHER_DTYPE_BODIES = [  # the members beside the signature's name
    b'"instances": [1, -2, 300, 70000]',  # wrapped into the dtype, as on the REST path
    b'"inputs": [[0, 255], [256, 65535]]',
    b'"instances": [4294967295, 2147483647]',
    b'"inputs": [1.5, 65520.0, -0.0]',  # refused by integer inputs, a float16's infinity
]


@pytest.mark.parametrize("values", OTHER_DTYPE_BODIES)
@pytest.mark.parametrize("signature", OTHER_DTYPES)
def test_other_dtypes_over_grpc(multi_model: Stack, signature: str, values: bytes) -> None:
    """int8, int16, uint8, uint16, uint32 and half inputs: the REST path's bytes, over gRPC
    (or refused by the service in the REST path's words), never the REST way (issue 53)."""
    body = b'{"signature_name": "%s", %s}' % (signature.encode(), values)
    grpc_before = answered_by(multi_model, "GRPC")
    counted = requests_counted(multi_model, DTYPE_ECHO)
    status, _, _ = assert_same_answers(multi_model, f"/models/{DTYPE_ECHO}/invoke", JSON, body,
                                       None, DTYPE_ECHO)  # fmt: skip
    refused = status == 400
    assert answered_by(multi_model, "GRPC") == grpc_before + (not refused)
    assert requests_counted(multi_model, DTYPE_ECHO) == counted + 1 + (not refused)


@pytest.mark.parametrize(
    "values",
    [b'"instances": [true, false, true]', b'"inputs": [[true], [false]]',
     b'"instances": [[true, false], [true]]'],  # ragged: refused by the service
)  # fmt: skip
def test_booleans_over_grpc(multi_model: Stack, values: bytes) -> None:
    """A bool input's true and false: the REST path's bytes, over gRPC (issue 53)."""
    test_other_dtypes_over_grpc(multi_model, "bool", values)


@pytest.mark.parametrize(
    "body", [b"-0\n-0.0\n0.5\n", b"1,-0,-0.000\r\n-00,2,-0e1\r\n", b"-0.000\n" * 3]
)
def test_csv_negative_zeros_over_grpc(multi_model: Stack, body: bytes) -> None:
    """CSV's ``-0`` (the integer 0 on the REST path) and ``-0.0`` (a negative zero) no longer
    send a body the REST way (issue 53)."""
    grpc_before = answered_by(multi_model, "GRPC")
    status, _, _ = assert_same_answers(multi_model, INVOKE, CSV, body, None)
    assert status == 200
    assert answered_by(multi_model, "GRPC") == grpc_before + 1


@pytest.mark.parametrize(("content_type", "text"), CASES)
def test_conversion_cases(multi_model: Stack, content_type: str, text: str) -> None:
    assert_same_answers(multi_model, INVOKE, content_type, text.encode(), "application/json")


@pytest.mark.parametrize(("content_type", "body", "status", "message"), BAD_BODIES)
def test_bad_bodies(multi_model: Stack, content_type: str, body: bytes, status: int,
                    message: str) -> None:  # fmt: skip
    answer = assert_same_answers(multi_model, INVOKE, content_type, body, None)
    assert answer[0] == status and message in answer[2].decode()


def takes_the_json_path(accept: str | None) -> bool:
    """The Accept headers whose answer is the model server's JSON (else: the fast path's)."""
    return answer_type(accept_list(accept or ""), accept or "").tfs_json


@pytest.mark.parametrize(
    ("accept", "one_line_type"), [case for case in ACCEPT_CASES if takes_the_json_path(case[0])]
)
def test_accept_cases(multi_model: Stack, accept: str | None, one_line_type: str | None) -> None:
    status, content_type, _ = assert_same_answers(multi_model, INVOKE, CSV, b"1\n2\n", accept)
    assert status == 200 and content_type == (one_line_type or JSON)


@pytest.mark.parametrize("accept", [None, "application/json"])
def test_an_error_of_the_model_is_answered_alike(multi_model: Stack, accept: str | None) -> None:
    """The model server refuses a matrix for mobilenet_v2's images, over gRPC as over REST
    (the numeric CSV is read here and sent over gRPC: test_text_tensors)."""
    status, _, answer = assert_same_answers(multi_model, "/models/mobilenet_v2/invoke", CSV,
                                            b"1,2,3\n", accept, "mobilenet_v2")  # fmt: skip
    assert status == 400 and b"needs a 4-dimensional input" in answer


def medium_bodies() -> list[tuple[str, bytes]]:
    """Bodies over the njs's 256 KB limit: the service reads them on a single-model endpoint."""
    rows = b"".join(b"%d.%d,-%de-3,%d\n" % (i, i % 7, i % 13 + 1, i) for i in range(40_000))
    numbers = b", ".join(b"%d.%d" % (i, i % 97) for i in range(60_000))
    pairs = b",".join(b"[%d, 0.%d]" % (i, i) for i in range(40_000))
    return [
        (CSV, rows),
        (CSV, b"0.123456789\n" * 40_000),
        (JSON, b'{"instances": [' + numbers + b"]}"),
        (JSON, b'{"inputs": [' + pairs + b"]}"),
        (JSON, b"[" + pairs + b"]"),
    ]


@pytest.mark.parametrize(("content_type", "body"), medium_bodies())
@pytest.mark.parametrize("accept", [None, "application/jsonlines"])
def test_bodies_over_the_njs_limit(single_model: Stack, content_type: str, body: bytes,
                                   accept: str | None) -> None:  # fmt: skip
    assert len(body) > 256 * 1024
    grpc_before = answered_by(single_model, "GRPC")
    status, _, answer = assert_same_answers(
        single_model, "/invocations", content_type, body, accept
    )
    assert status == 200 and len(answer) > 256 * 1024
    assert answered_by(single_model, "GRPC") == grpc_before + 1


@pytest.mark.parametrize(
    "body",
    [
        b"1,abc\n" * 60_000,  # strings: the REST path's error
        b"1,2\n" * 70_000 + b"3\n",  # a short last row: conversion's error
        b"1\n" * 150_000 + b"1e400\n",  # beyond a double: the model server's error
    ],
)
def test_bad_bodies_over_the_njs_limit(single_model: Stack, body: bytes) -> None:
    assert len(body) > 256 * 1024
    status, _, answer = assert_same_answers(single_model, "/invocations", CSV, body, None)
    assert status == 400 and b"error" in answer


@pytest.mark.parametrize(("values", "chunked"), [(30_000, False), (300_000, True)])
def test_a_large_answer_is_sent_as_it_is_written(single_model: Stack, values: int,
                                                 chunked: bool) -> None:  # fmt: skip
    """An answer over 1 MiB is not held whole: it leaves chunked (nginx passes it on so), a
    smaller one with its Content-Length, as the REST path's; the bytes are the same."""
    body = "".join(f"{value:.3f}\n" for value in np.linspace(-1, 1, values)).encode()
    response = requests.post(single_model.url + "/invocations", data=body,
                             headers={"Content-Type": CSV}, timeout=120)  # fmt: skip
    assert response.status_code == 200
    assert (len(response.content) > 1 << 20) == chunked
    if chunked:
        assert response.headers["Transfer-Encoding"] == "chunked"
        assert "Content-Length" not in response.headers
    else:
        assert int(response.headers["Content-Length"]) == len(response.content)
    by_rest = rest_answer(single_model, f"/v1/models/{MODEL}:predict", CSV, body, None)
    assert (200, JSON, response.content) == by_rest


NULL_AND_WORDS_REFUSED = [  # since issue 53's one-implementation part: refused by the service
    (MODEL, JSON, b'{"instances": [1.0, null, 3.0]}'),
    (MODEL, JSON, b'{"inputs": [[1.5], [true]]}'),
    (MODEL, JSON_LINES, b"[1, 2]\n[null, 4]\n"),
    (TWO_INPUTS, JSON, b'{"instances": [{"a": 1.0, "b": 2.0}, {"a": null, "b": 0.5}]}'),
    (TWO_INPUTS, JSON, b'{"inputs": {"a": [1.5, 2.5], "b": [false, 1]}}'),
    (INTEGERS, JSON, b'{"instances": [1, 2, null]}'),
    (DTYPE_ECHO, JSON, b'{"signature_name": "bool", "instances": [true, 1]}'),
    (DTYPE_ECHO, JSON, b'{"signature_name": "uint8", "inputs": [[1, 2], [null, 4]]}'),
]


@pytest.mark.parametrize(("model", "content_type", "body"), NULL_AND_WORDS_REFUSED)
@pytest.mark.parametrize("accept", [None, "application/jsonlines"])
def test_null_and_words_refused_alike(multi_model: Stack, model: str, content_type: str,
                                      body: bytes, accept: str | None) -> None:  # fmt: skip
    """``null``, or ``true``/``false`` given an input that is not bool, or a number given a
    bool input: the REST path's 400 and words, from the service; the model server counts no
    request for it but the parity's own REST post (fails before: the REST way)."""
    before = requests_counted(multi_model, model)
    status, _, _ = assert_same_answers(multi_model, f"/models/{model}/invoke", content_type,
                                       body, accept, model)  # fmt: skip
    assert status == 400
    assert requests_counted(multi_model, model) == before + 1


EMPTY_LISTS = [  # since issue 53's one-implementation part: over gRPC
    (MODEL, b'{"inputs": []}'),
    (DTYPE_ECHO, b'{"signature_name": "int8", "inputs": [[], []]}'),
    (DTYPE_ECHO, b'{"signature_name": "half", "instances": [[], [], []]}'),
    (DTYPE_ECHO, b'{"signature_name": "bool", "instances": [[[]], [[]]]}'),
    (DTYPE_ECHO, b'{"signature_name": "uint16", "inputs": [[[], []]]}'),
]


@pytest.mark.parametrize(("model", "body"), EMPTY_LISTS)
@pytest.mark.parametrize("accept", [None, "application/json"])
def test_empty_lists_over_grpc(multi_model: Stack, model: str, body: bytes,
                               accept: str | None) -> None:  # fmt: skip
    """Empty lists: the REST path's bytes, over gRPC (fails before: the REST way)."""
    grpc_before = answered_by(multi_model, "GRPC")
    assert_same_answers(multi_model, f"/models/{model}/invoke", JSON, body, accept, model)
    assert answered_by(multi_model, "GRPC") == grpc_before + 1


RAGGED_NAMED = [  # to two_inputs; refused by the service since issue 53's one-implementation part
    (JSON, b'{"instances": [{"a": [1.0, 2.0], "b": 1}, {"a": [1.5], "b": 2}]}'),
    (JSON, b'{"instances": [{"a": 1, "b": 1}, {"a": [1], "b": 2}]}'),
    (JSON, b'{"inputs": {"a": [[1, 2], [3]], "b": [1, 2]}}'),
    (JSON_LINES, b'{"a": [1, 2], "b": 1}\n{"a": [1, 2, 3], "b": 2}\n'),
]


@pytest.mark.parametrize(("content_type", "body"), RAGGED_NAMED)
def test_ragged_named_inputs_refused_alike(multi_model: Stack, content_type: str,
                                           body: bytes) -> None:  # fmt: skip
    """One named input ragged: the REST path's 400 and words, from the service; the model
    server counts no request but the parity's own REST post (fails before: the REST way)."""
    before = requests_counted(multi_model, TWO_INPUTS)
    status, _, _ = assert_same_answers(multi_model, f"/models/{TWO_INPUTS}/invoke", content_type,
                                       body, None, TWO_INPUTS)  # fmt: skip
    assert status == 400
    assert requests_counted(multi_model, TWO_INPUTS) == before + 1


MIXED_BODIES = [  # to mixed_inputs; over gRPC since issue 53's one-implementation part
    (JSON, b'{"inputs": {"a": [1.5, -0.0, NaN], "b": [2, 9007199254740993, -4]}}'),
    (JSON, b'{"instances": [{"a": 1e-3, "b": [1, 2]}, {"a": 2, "b": [3, 4]}]}'),
    (JSON_LINES, b'{"b": 7, "a": [0.5, 1]}\n{"b": -8, "a": [2, 3]}\n'),
]


@pytest.mark.parametrize(("content_type", "body"), MIXED_BODIES)
@pytest.mark.parametrize("accept", [None, "application/jsonlines"])
def test_mixed_dtypes_over_grpc(multi_model: Stack, content_type: str, body: bytes,
                                accept: str | None) -> None:  # fmt: skip
    """A float input beside an int64 one: the REST path's bytes, over gRPC (fails before:
    the REST way)."""
    grpc_before = answered_by(multi_model, "GRPC")
    status, _, _ = assert_same_answers(multi_model, f"/models/{MIXED}/invoke", content_type,
                                       body, accept, MIXED)  # fmt: skip
    assert status == 200
    assert answered_by(multi_model, "GRPC") == grpc_before + 1


UINT64_BODIES = [  # to mixed_inputs' uint64 signature; over gRPC (or refused by the service)
    b'"instances": [0, 18446744073709551615, 9223372036854775808]',
    b'"inputs": [[1, 2], [3, 4]]',
    b'"instances": [1, -1]',  # refused, as the REST path refuses it
    b'"inputs": [1, 2.5]',
    b'"instances": [18446744073709551616]',  # beyond a uint64: a double, refused
]


@pytest.mark.parametrize("values", UINT64_BODIES)
def test_uint64_over_grpc(multi_model: Stack, values: bytes) -> None:
    """A uint64 input: the REST path's bytes, over gRPC, or its 400 from the service (fails
    before: the REST way)."""
    body = b'{"signature_name": "uint64", %s}' % values
    grpc_before = answered_by(multi_model, "GRPC")
    counted = requests_counted(multi_model, MIXED)
    status, _, _ = assert_same_answers(multi_model, f"/models/{MIXED}/invoke", JSON, body, None,
                                       MIXED)  # fmt: skip
    refused = status == 400
    assert answered_by(multi_model, "GRPC") == grpc_before + (not refused)
    assert requests_counted(multi_model, MIXED) == counted + 1 + (not refused)


@pytest.mark.parametrize(
    "body",
    [b'{"inputs": {"a": [1.5], "b": [2.5]}}',
     b'{"instances": [{"a": 1, "b": 2}, {"a": null, "b": 3}]}',
     b'{"inputs": {"a": [true], "b": [2]}}'],
)  # fmt: skip
def test_mixed_dtypes_refused_alike(multi_model: Stack, body: bytes) -> None:
    """A value one of the inputs does not take: the REST path's 400 and words, from the
    service (fails before: the REST way)."""
    before = requests_counted(multi_model, MIXED)
    status, _, _ = assert_same_answers(multi_model, f"/models/{MIXED}/invoke", JSON, body, None,
                                       MIXED)  # fmt: skip
    assert status == 400
    assert requests_counted(multi_model, MIXED) == before + 1
