"""The njs's conversion alone, in the installed nginx's njs: microseconds per ``convert`` call
of ``tensorflow_serving.js`` on small bodies, for this tree's njs and another's, in
alternating rounds (each round runs every variant once, in a new random order).

Each variant is one nginx (one worker) whose ``js_content`` calls ``convert`` in a loop of
``--calls`` and answers the time taken; nothing else of the stack runs.

Usage::

    git show REV:container/sagemaker_tfs/nginx/tensorflow_serving.js > /tmp/before.js
    .venv/bin/python test/perf/bench_njs_convert.py --variant before=/tmp/before.js \\
        --variant after=container/sagemaker_tfs/nginx/tensorflow_serving.js --rounds 8
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from local_ports import free_port  # noqa: E402
from sagemaker_tfs.supervisor.nginx_config import njs_module_path  # noqa: E402

BODIES = {
    "small JSON": ("application/json", '{"instances": [1.0, 2.0, 5.0]}'),
    "small CSV": ("text/csv", "1.0,2.0\n3.0,4.0\n"),
}
BENCH_JS = """import tfs from 'tensorflow_serving.js';
function run(r) {
    var cases = %s;
    var calls = %d;
    var result = {};
    for (var name in cases) {
        var started = Date.now();
        for (var i = 0; i < calls; i++) {
            tfs.convert(cases[name][0], cases[name][1]);
        }
        result[name] = (Date.now() - started) * 1000 / calls;
    }
    r.return(200, JSON.stringify(result));
}
export default {run};
"""
NGINX_CONF = """load_module {module};
daemon off; master_process off; worker_processes 1; pid {work}/nginx.pid;
error_log stderr warn;
events {{}}
http {{
    access_log off; js_path {work}/; js_import bench.js;
    server {{ listen 127.0.0.1:{port}; location / {{ js_content bench.run; }} }}
}}
"""


def start(njs: Path, work: Path, calls: int) -> tuple[subprocess.Popen[bytes], str]:
    work.mkdir(parents=True)
    shutil.copy(njs, work / "tensorflow_serving.js")
    (work / "bench.js").write_text(BENCH_JS % (json.dumps(BODIES), calls))
    port = free_port()
    conf = NGINX_CONF.format(module=njs_module_path(), work=work, port=port)
    (work / "nginx.conf").write_text(conf)
    process = subprocess.Popen(["nginx", "-p", f"{work}/", "-c", str(work / "nginx.conf")])
    url = f"http://127.0.0.1:{port}/"
    for _ in range(100):
        with contextlib.suppress(OSError):
            urllib.request.urlopen(url, timeout=60).read()
            return process, url
        time.sleep(0.1)
    raise RuntimeError(f"nginx for {njs} did not answer")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variant", action="append", required=True, help="LABEL=NJS_FILE")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args(argv)
    variants = dict(spec.split("=", 1) for spec in args.variant)
    temp = Path(tempfile.mkdtemp(prefix="njs-bench-"))
    servers: dict[str, tuple[subprocess.Popen[bytes], str]] = {}
    results: dict[str, list[dict[str, float]]] = {label: [] for label in variants}
    try:
        for label, njs in variants.items():
            servers[label] = start(Path(njs), temp / label, args.calls)
        for _ in range(args.rounds):
            for label in random.sample(list(variants), len(variants)):
                answer = urllib.request.urlopen(servers[label][1], timeout=120).read()
                results[label].append(json.loads(answer))
        for body in BODIES:
            for label, rounds in results.items():
                figures = [round(r[body], 2) for r in rounds]
                print(f"{body:12s} {label:10s} median {statistics.median(figures):6.2f} us/call"
                      f"  rounds {figures}")  # fmt: skip
    finally:
        for process, _ in servers.values():
            process.terminate()
            process.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
