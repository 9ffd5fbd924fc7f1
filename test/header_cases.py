"""Header values read by both the njs and ``sagemaker_tfs/wire/http_headers.py``, for the tests
that run both parsers on the same cases (``test_njs_parity.py``) and those of the Python one.

Whitespace other than spaces and tabs (HTTP's optional whitespace) is kept by both: a vertical
tab, a no-break space, a byte order mark or an information separator is part of the value.
"""

from __future__ import annotations

CONTENT_TYPES = [
    None,
    "",
    "application/json",
    "Application/JSON; charset=utf-8",
    " text/csv\t",
    "application/x-npy;",
    ";charset=utf-8",
    "image/jpeg ; q=1",
    "application/json\xa0",
    "\ufeffapplication/json",
    "application/json\x0b",
    "application/json\x1c",
    "IMAGE/PNG",
    'application/x-image-stream; boundary="a;b"',
]

ACCEPT_HEADERS = [
    None,
    "",
    "*/*",
    "application/json",
    "application/json, application/jsonlines",
    "Application/JSONLines; q=0.9, */*;q=0.1",
    ", application/json",
    ",,",
    " application/x-npy ,\ttext/csv",
    "application/json\xa0, text/csv",
    "text/csv;charset=utf-8,application/json",
    "\x0btext/csv",
]

CUSTOM_ATTRIBUTES = [
    None,
    "",
    "tfs-model-name=half_plus_two",
    "tfs-model-name=m,tfs-model-version=2,tfs-method=regress",
    " tfs-model-name = m , tfs-model-version= 12 ",
    "tfs-model-name=a=b",
    "tfs-model-name=a,tfs-model-name=b",
    "tfs-model-name",
    "=x,tfs-method=classify",
    "tfs-model-name=,tfs-method=",
    "other=1,tfs-output-filter=a;b,tfs-model-version=3",
    "TFS-MODEL-NAME=upper",
    "tfs-model-name=m\t,\ttfs-method=predict",
    ",,,",
    "tfs-model-name=mödel",
    "tfs-model-name=m\x1c",
    "tfs-model-name=m\xa0",
    "tfs-model-name=\ufeffm",
    "tfs-model-name=m\x0b,tfs-method=\x85predict",
]
