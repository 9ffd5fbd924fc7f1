"""Cases of the rules written in both the njs and the Python service, shared by the tests that
run both implementations (or the Python one two ways) on the same cases.

``CASES``: request bodies for the JSON/JSON lines/CSV conversion, good and bad.
``BAD_BODIES``: bodies both implementations refuse, with the status and a piece of the message.
``ACCEPT_CASES``: Accept headers and the type of the one-line JSON answer they get.
"""

from __future__ import annotations

CASES = [
    ("application/json", '{"instances": [1.0, 2.0]}'),
    ("application/json", '{"inputs": {"x": [1]}}'),
    ("application/json", "[1.0, 2.0]"),
    ("application/json", "[[1.0, 2.0], [3.0, 4.0]]"),
    ("application/json", "[[1.0], 2.0]"),
    ("application/json", "[]"),
    ("application/json", '"text"'),
    ("application/json", "1.5"),
    ("application/json", '{"x": 1}'),
    ("application/json", '{"x": 1}\n{"x": 2}\n'),
    ("application/json", '[1, "a]"] [3, 4]'),
    ("application/json", ""),
    ("application/json", "{bad"),
    ("application/json", '{"a": 1} tail'),
    ("application/jsonlines", '{"a": [1, 2]}\r\n\n{"a": [3, "x\\n}"]}\n'),
    ("application/jsonlines", "[1.0]"),
    ("application/jsonlines", "1\n2"),
    ("application/jsonlines", '{"a": 1}\n{"a": '),
    ("application/jsons", ""),
    ("text/csv", "1.0,2.0\n3.0,4.0\n"),
    ("text/csv", "1.0\n2.0\n"),
    ("text/csv", '1,abc,"q"\r\n'),
    ("text/csv", "1.10,12345678901234567890,-0.5e-3"),
    ("text/csv", "1,2\n3\n"),
    ("text/csv", ""),
    ("text/csv", "\ufeff1,2\n"),
    ("text/csv", "1\x1c,\xa02\n"),
    ("text/csv", "1\x0b,2\x85\n"),
    ("text/csv", "\t1 , 2\t\n"),
    ("application/json", "\ufeff[1]"),
    ("application/json", "\x1c"),
]

# (content type, body, status, text in the message): the njs (through the stack) and the
# Python conversion answer each alike.
BAD_BODIES = [
    ("application/json", b"", 400, "Empty request body"),
    ("application/json", b"   \n", 400, "Empty request body"),
    ("application/json", b"{", 400, "Invalid JSON"),
    ("application/json", b"[1.0,", 400, "Invalid JSON"),
    ("application/json", b"{not json", 400, "Invalid JSON"),
    ("application/json", b'{"a": 1} xyz', 400, "Invalid JSON"),
    ("application/jsonlines", b"", 400, "Empty request body"),
    ("application/jsonlines", b"1\n2", 400, "Invalid JSON lines"),
    ("application/jsonlines", b"[1.0]\n{", 400, "Invalid JSON lines"),
    ("application/jsonlines", b'{"a": 1}\n{"a": ', 400, "Invalid JSON lines"),
    ("text/csv", b"", 400, "Empty request body"),
    ("text/csv", b"1.0,2.0\n3.0", 400, "Invalid CSV"),
    ("text/csv", b"1,2\n3\n", 400, "row 2 has 1 fields, expected 2"),
]

# (Accept header, the Content-Type of the one-line answer; None: answered as written)
ACCEPT_CASES: list[tuple[str | None, str | None]] = [
    (None, None),
    ("", None),
    ("*/*", None),
    ("application/json", "application/json"),
    ("application/jsonlines", "application/jsonlines"),
    ("application/json, application/jsonlines", "application/json"),
    ("application/jsonlines, application/json", "application/jsonlines"),
    ("application/json,application/jsonlines", "application/json"),
    ("Application/JSON; charset=utf-8", "application/json"),
    ("application/jsonlines;q=0.9, */*;q=0.1", "application/jsonlines"),
    ("*/*, application/jsonlines", "application/json"),
    ("application/jsons", "application/jsons"),
    (", application/json", "application/json"),
    ("text/csv", None),
    ("text/csv, application/json", "application/json"),
]
