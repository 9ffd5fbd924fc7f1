"""The njs conversions agree with the Python ones on the same inputs.

``tensorflow_serving.js`` is plain ECMAScript apart from the ``r`` object of its request
handlers, so its ``convert`` can be run by Node.js; the Python service's
``conversion.convert`` is the other implementation of CONTRACT.md's table. Both must give
the same TF Serving request (or the same error status) for every case below. (Node's
JSON.parse has no nesting limit, njs's has; nesting is tested against nginx in test_njs.py.)
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from sagemaker_tfs.service.conversion import convert
from sagemaker_tfs.supervisor import nginx_config
from sagemaker_tfs.wire.errors import HttpError

RUNNER = """
import tfs from './tensorflow_serving.mjs';
let input = '';
process.stdin.on('data', (chunk) => { input += chunk; });
process.stdin.on('end', () => {
    const results = JSON.parse(input).map(([contentType, body]) => {
        try {
            return {body: tfs.convert(contentType, body)};
        } catch (e) {
            return {status: e.status, message: e.message};
        }
    });
    process.stdout.write(JSON.stringify(results));
});
"""

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
]


def run_njs(tmp_path: Path) -> list[dict]:
    source = (nginx_config.templates_dir() / nginx_config.NJS_NAME).read_text()
    (tmp_path / "tensorflow_serving.mjs").write_text(source)
    (tmp_path / "runner.mjs").write_text(RUNNER)
    result = subprocess.run(
        ["node", str(tmp_path / "runner.mjs")],
        input=json.dumps(CASES),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return json.loads(result.stdout)


def run_python(content_type: str, body: str) -> dict:
    try:
        return {"body": convert(content_type, body.encode())}
    except HttpError as error:
        return {"status": error.status, "message": error.message}


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")
def test_njs_and_python_convert_alike(tmp_path: Path) -> None:
    for (content_type, body), njs in zip(CASES, run_njs(tmp_path), strict=True):
        python = run_python(content_type, body)
        case = f"{content_type} {body!r}: njs {njs} python {python}"[:500]
        if "body" in python:
            assert "body" in njs, case
            assert json.loads(njs["body"]) == json.loads(python["body"]), case
        else:
            assert njs.get("status") == python["status"], case
