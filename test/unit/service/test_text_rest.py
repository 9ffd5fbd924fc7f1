"""docs/contract.md's conversion table in Python (``text_rest``: the REST request written).

Also the reference container's rule for Accept and the model server's JSON answer: when
Accept lists application/json or a JSON lines type, the answer is the model server's JSON
with its newlines removed and the first listed type as Content-Type. (The njs implements
both too: test_njs_parity.py runs it on the same cases.)
"""

from __future__ import annotations

import json

import pytest
from conversion_cases import ACCEPT_CASES, BAD_BODIES, CASES
from sagemaker_tfs.service.codecs.content_types import one_line_json_type
from sagemaker_tfs.service.codecs.text import text_rest
from sagemaker_tfs.service.codecs.text.text_rest import convert, read_values
from sagemaker_tfs.wire.errors import HttpError
from sagemaker_tfs.wire.http_headers import accept_list


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('{"instances": [1.0, 2.0]}', '{"instances": [1.0, 2.0]}'),
        ('{"inputs": {"x": [1]}}', '{"inputs": {"x": [1]}}'),
        ('{"examples": [{"x": 1}]}', '{"examples": [{"x": 1}]}'),
        ("[1.0, 2.0]", '{"instances": [[1.0, 2.0]]}'),
        ("[[1.0, 2.0], [3.0, 4.0]]", '{"instances": [[1.0, 2.0], [3.0, 4.0]]}'),
        ("1.5", '{"instances": [1.5]}'),
        ('{"x": 1}', '{"instances": [{"x": 1}]}'),
        ('{"x": 1}\n{"x": 2}\n', '{"instances": [{"x": 1},{"x": 2}]}'),
        ("[1, 2] [3, 4]", '{"instances": [[1, 2],[3, 4]]}'),
    ],
)
def test_json(body: str, expected: str) -> None:
    assert convert("application/json", body.encode()) == expected


@pytest.mark.parametrize("content_type", ["application/jsonlines", "application/jsons"])
def test_json_lines(content_type: str) -> None:
    body = b'{"a": [1, 2]}\r\n\n{"a": [3, "x\\n}"]}\n'
    result = convert(content_type, body)
    assert json.loads(result) == {"instances": [{"a": [1, 2]}, {"a": [3, "x\n}"]}]}


def test_single_json_line_is_one_instance() -> None:
    assert convert("application/jsonlines", b"[1, 2]") == '{"instances": [[1, 2]]}'


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("1.0,2.0\n3.0,4.0\n", {"instances": [[1.0, 2.0], [3.0, 4.0]]}),
        ("1.0\n2.0\n", {"instances": [1.0, 2.0]}),
        ("1.0,2.0", {"instances": [[1.0, 2.0]]}),
        ('1,abc,"q"\r\n', {"instances": [[1, "abc", "q"]]}),
        ("+1,.5,2.", {"instances": [[1, 0.5, 2.0]]}),
    ],
)
def test_csv(body: str, expected: dict) -> None:
    assert json.loads(convert("text/csv", body.encode())) == expected


def test_csv_numbers_keep_their_spelling() -> None:
    assert convert("text/csv", b"1.10,12345678901234567890") == (
        '{"instances": [[1.10,12345678901234567890]]}'
    )


@pytest.mark.parametrize(
    ("content_type", "body", "status", "text"),
    [
        *BAD_BODIES,
        ("application/json", b"\xff\xfe", 400, "not UTF-8"),
        ("image/png", b"x", 415, "Unsupported Media Type: image/png"),
    ],
)
def test_bad_input(content_type: str, body: bytes, status: int, text: str) -> None:
    with pytest.raises(HttpError) as raised:
        convert(content_type, body)
    assert raised.value.status == status
    assert text in raised.value.message


@pytest.mark.parametrize(
    "body", [b"[" + b"1" * 5000 + b"]", b"[" * 100_000 + b"]" * 100_000, b"\xff\xfe"]
)
def test_hostile_json_is_400_not_500(body: bytes) -> None:
    with pytest.raises(HttpError) as raised:
        convert("application/json", body)
    assert raised.value.status == 400
    assert len(raised.value.message) < 300


@pytest.mark.parametrize(("content_type", "body"), CASES)
def test_read_values_reads_what_convert_wraps(content_type: str, body: str) -> None:
    """The fast path (``read_values``) refuses what the njs and multi-model paths refuse,
    and reads the values their request carries."""
    try:
        request = json.loads(convert(content_type, body.encode()))
    except HttpError as error:
        with pytest.raises(HttpError) as raised:
            read_values(content_type, body.encode())
        assert raised.value.status == error.status
        return
    assert read_values(content_type, body.encode()) == request


@pytest.mark.parametrize(("accept", "expected"), ACCEPT_CASES)
def test_one_line_type(accept: str | None, expected: str | None) -> None:
    assert one_line_json_type(accept_list(accept)) == expected


WORD_CSVS = [
    "abc\nde\n", "abc\r\nde\r\n", "abc\nde", "a,b\nc,d\n", "a,b\r\nc,d", "NaN\nInfinity\ne5\n",
    "x1.5,y-2,Z~!#$%&'()*+-./:;<=>?@[]^_`{|}\n", "abc\n\nde\n", " abc\n", "abc \n", "abc\t\n",
    "a,b\nc\n", "a\nb,c\n", 'a\n"b"\n', "a\nb\\c\n", "a\n1\n", "a\n-1\n", "a\n.5\n", "a,\n",
    "a\nb\x7f\n", "a\né\n", "a\rb\n", "a\n\r\n", "\nabc\n", "a,b,c\nd,e,f\nG,H,I",
]  # fmt: skip


@pytest.mark.parametrize("body", WORD_CSVS)
def test_csv_of_words_as_field_by_field(body: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows of plain words are written by whole-text replaces: the same request, or the same
    error, as a field at a time, in one piece or in pieces of a line."""

    def written() -> str | tuple[int, str]:
        try:
            whole = convert("text/csv", body.encode())
            pieces = b"".join(text_rest.convert_csv_pieces(body.encode(), 1).pieces())
        except HttpError as error:
            return error.status, error.message
        assert pieces.decode() == whole
        return whole

    fast = written()
    monkeypatch.setattr(text_rest._CsvRows, "_plain_words", lambda _, __: None)
    assert fast == written()


def test_csv_of_words_is_not_written_a_field_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(_: str) -> str:
        raise AssertionError("a field at a time")

    monkeypatch.setattr(text_rest, "_csv_field", refused)
    body = b"alpha\nbeta\r\ngamma\n" * 1000
    assert json.loads(convert("text/csv", body))["instances"][:3] == ["alpha", "beta", "gamma"]
    pieces = b"".join(text_rest.convert_csv_pieces(b"a,b\nc,d\n" * 1000, 64).pieces())
    assert json.loads(pieces)["instances"][-1] == ["c", "d"]
