"""Where a model server's restart goes: process start, TensorFlow import, model load, ready.

    python test/reliability/model_server_startup.py [--runs 3] MODEL_BASE_PATH...

Starts the model server the supervisor would start (``tensorflow_model_server`` if installed,
else ``sagemaker-tfs model-server``) on free ports for each model, ``--runs`` times, and prints
one figure line per model: until it starts adding the model (interpreter and TensorFlow
import), until
"Successfully loaded servable" (model load), until the REST status says AVAILABLE (ready).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from local_ports import free_port  # noqa: E402
from sagemaker_tfs.model_discovery import ModelSpec  # noqa: E402
from sagemaker_tfs.supervisor.model_servers.command_lines import (  # noqa: E402
    model_server_command,
    render_model_config,
)
from sagemaker_tfs.supervisor.model_servers.model_availability import (
    model_is_available,
)  # noqa: E402


def one_start(base_path: Path, work: Path) -> tuple[float, float, float]:
    name = base_path.name
    config = work / f"{name}.config"
    config.write_text(render_model_config([ModelSpec(name, str(base_path))]))
    grpc_port, rest_port = free_port(), free_port()
    argv = model_server_command() + [
        f"--port={grpc_port}",
        f"--rest_api_port={rest_port}",
        f"--model_config_file={config}",
    ]
    marks: dict[str, float] = {}
    started = time.monotonic()
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            now = time.monotonic() - started
            if "Adding/updating models" in line:  # TF Serving's line, and ours
                marks.setdefault("adding", now)
            if "Successfully loaded servable" in line:
                marks.setdefault("loaded", now)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        while True:
            try:
                if model_is_available(rest_port, name):
                    break
            except Exception:  # noqa: BLE001 - not up yet
                pass
            if process.poll() is not None or time.monotonic() - started > 300:
                raise RuntimeError(f"model server for {name} did not become ready")
            time.sleep(0.02)
        ready = time.monotonic() - started
    finally:
        process.terminate()
        process.wait(30)
    return marks.get("adding", ready), marks.get("loaded", ready), ready


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("models", nargs="+", type=Path)
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with tempfile.TemporaryDirectory() as work:
        for base_path in args.models:
            runs = [one_start(base_path.resolve(), Path(work)) for _ in range(args.runs)]
            first, loaded, ready = (statistics.median(values) for values in zip(*runs, strict=True))
            print(
                f"model server start-up: {base_path.name}: {args.runs} runs, median "
                f"{first:.2f} s until it adds the model (interpreter + TensorFlow import), "
                f"{loaded:.2f} s model loaded, {ready:.2f} s AVAILABLE "
                f"(max {max(r[2] for r in runs):.2f} s)",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
