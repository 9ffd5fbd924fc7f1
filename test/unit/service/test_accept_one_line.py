"""Accept and the model server's JSON answer: the reference container's one-line rule.

When Accept lists application/json or a JSON lines type, the answer is the model server's
JSON with its newlines removed and the first listed type as Content-Type. The njs
(``oneLineJsonType``) and the Python service (``conversion.one_line_json_type``) implement
it twice; both must agree on every case (the njs runs under Node.js here, and under nginx in
test/integration/stack/test_versions_and_accept.py).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from sagemaker_tfs.service.conversion import one_line_json_type
from sagemaker_tfs.supervisor import nginx_config

CASES: list[tuple[str | None, str | None]] = [
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

RUNNER = """
import tfs from './tensorflow_serving.mjs';
const cases = JSON.parse(process.argv[2]);
process.stdout.write(JSON.stringify(cases.map((accept) => tfs.oneLineJsonType(accept))));
"""


@pytest.mark.parametrize(("accept", "expected"), CASES)
def test_one_line_type(accept: str | None, expected: str | None) -> None:
    assert one_line_json_type(accept) == expected


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")
def test_njs_agrees(tmp_path: Path) -> None:
    source = (nginx_config.templates_dir() / nginx_config.NJS_NAME).read_text()
    (tmp_path / "tensorflow_serving.mjs").write_text(source)
    (tmp_path / "runner.mjs").write_text(RUNNER)
    accepts = [accept for accept, _ in CASES]
    result = subprocess.run(
        ["node", str(tmp_path / "runner.mjs"), json.dumps(accepts)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert json.loads(result.stdout) == [expected for _, expected in CASES]
