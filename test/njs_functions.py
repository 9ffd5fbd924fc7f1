"""Run functions of the njs (``tensorflow_serving.js``) under Node.js, for parity tests.

The njs is plain ECMAScript apart from the ``r`` object of its request handlers, so the
functions it exports can be called by Node.js on the same cases as their Python
counterparts. (Node's JSON.parse has no nesting limit and its regular expressions are not
PCRE, as njs's are: what differs there is tested against nginx in test/integration/stack.)
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest
from sagemaker_tfs.supervisor import nginx_config

RUNNER = """
import tfs from './tensorflow_serving.mjs';
let input = '';
process.stdin.on('data', (chunk) => { input += chunk; });
process.stdin.on('end', () => {
    const [name, cases] = JSON.parse(input);
    const target = tfs[name];
    const results = cases.map((args) => {
        try {
            const value = target instanceof RegExp ? target.test(args[0]) : target(...args);
            return {value: value === undefined ? null : value};
        } catch (e) {  /* a RequestError, or a HandOver (the service is to convert it) */
            return e.reason !== undefined ? {handOver: e.reason} :
                {status: e.status, message: e.message};
        }
    });
    process.stdout.write(JSON.stringify(results));
});
"""

needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")


def call_njs(workdir: Path, name: str, cases: Sequence[Sequence[object]]) -> list[dict]:
    """``tfs[name](*args)`` for each ``args`` of ``cases`` (``tfs[name].test(args[0])`` for a
    regular expression): ``{"value": ...}`` or, when it throws, ``{"status", "message"}`` (or
    ``{"handOver": reason}`` when it hands the body to the Python service)."""
    source = (nginx_config.templates_dir() / nginx_config.NJS_NAME).read_text()
    (workdir / "tensorflow_serving.mjs").write_text(source)
    (workdir / "runner.mjs").write_text(RUNNER)
    result = subprocess.run(
        ["node", str(workdir / "runner.mjs")],
        input=json.dumps([name, [list(args) for args in cases]]),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return json.loads(result.stdout)
