#!/bin/sh
# The image checks itself at the end of its build (the Dockerfile's smoke stage): a broken
# image fails to build instead of failing on SageMaker. It leaves nothing behind: no files,
# no bytecode.
set -eu
export PYTHONDONTWRITEBYTECODE=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "smoke test: the model server binary"
/usr/bin/tensorflow_model_server --version

echo "smoke test: the service, the stream server, the supervisor and the gRPC helper import"
/opt/venv/bin/python -c "import sagemaker_tfs.service.edge.app, sagemaker_tfs.service.stream.stream_server, sagemaker_tfs.supervisor.main, sagemaker_tfs.client"

echo "smoke test: nginx -t on the configurations serve renders"
/opt/venv/bin/python - "$work" <<'PYTHON'
import sys
from pathlib import Path

from sagemaker_tfs.config import load_config
from sagemaker_tfs.supervisor import nginx_config

work = Path(sys.argv[1])
for name in ("plain", "with_code"):
    version = work / name / "model" / "1"
    version.mkdir(parents=True)
    (version / "saved_model.pb").touch()
(work / "with_code" / "code").mkdir()
(work / "with_code" / "code" / "inference.py").touch()
cases = {
    "single": ({}, work / "plain"),
    "single-with-code": ({}, work / "with_code"),
    "multi": ({"SAGEMAKER_MULTI_MODEL": "true"}, work / "plain"),
    "batch": ({"SAGEMAKER_BATCH": "true", "SAGEMAKER_MAX_PAYLOAD_IN_MB": "20"}, work / "plain"),
    "access-log": ({"SAGEMAKER_TFS_ACCESS_LOG": "json"}, work / "plain"),
}
for case, (environ, model_dir) in cases.items():
    config = load_config(environ, model_dir=str(model_dir), work_dir=str(work / "conf" / case))
    Path(config.work.root).mkdir(parents=True)
    (Path(config.work.root) / "nginx.conf").write_text(nginx_config.render(config))
PYTHON
for conf in "$work"/conf/*/nginx.conf; do
    nginx -t -q -e stderr -p "$(dirname "$conf")/" -c "$conf"
done
echo "smoke test: passed"
