"""What the stack's metrics are called, shared by the processes that count them (the Python
service's workers) and the supervisor, which exposes them all on the metrics path.

The service tells nginx the route, model and version of each invocation in the response
headers below; nginx hides them from the client and puts them in its log lines
(``nginx/logging.conf``).
"""

from __future__ import annotations

PREFIX = "sagemaker_tfs"
# prometheus_client's multiprocess directory: set for the gunicorn workers only.
MULTIPROCESS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"
# Seconds: from 1 ms (nginx's resolution) to the longest invocation timeouts.
LATENCY_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)  # fmt: skip
# Bytes: from a small JSON body to Batch Transform's 100 MB.
SIZE_BUCKETS = tuple(float(4**power * 256) for power in range(11))

# Counted by nginx (the supervisor turns its log lines into these) for njs-converted requests
# and by the service for the others: one family, the route label tells them apart.
MODEL_SERVER_CALL_SECONDS = f"{PREFIX}_model_server_call_seconds"
MODEL_SERVER_CALL_HELP = "Time of the stack's calls to a model server during an invocation"

# The route of an invocation (label "route"): which part of the stack answered it.
ROUTE_NJS = "njs"  # JSON, JSON lines or CSV converted in nginx for the model server's REST API
ROUTE_CONVERSION = "conversion"  # the same converted by the service (multi-model endpoints)
ROUTE_FAST_PATH = "fast_path"  # binary payloads answered by the service over gRPC
ROUTE_INFERENCE_PY = "inference_py"  # the user's code/inference.py
ROUTE_SERVICE = "service"  # the service answered before it chose one of the two above
ROUTE_SESSION = "session"  # a stateful session opened, closed or refused by the service
ROUTE_NGINX = "nginx"  # refused by nginx itself before a route was chosen
ROUTES = frozenset(
    (
        ROUTE_NJS,
        ROUTE_CONVERSION,
        ROUTE_FAST_PATH,
        ROUTE_INFERENCE_PY,
        ROUTE_SERVICE,
        ROUTE_SESSION,
        ROUTE_NGINX,
    )
)
# The value of the model label for any name the stack does not serve (made-up names in
# requests must not add one series each).
UNKNOWN_MODEL = "unknown"
# Why an invocation was shed (label "reason"; 503 with Retry-After): more were in flight and
# waiting than SAGEMAKER_TFS_MAX_CONCURRENT_INVOCATIONS; its deadline passed while it waited;
# the model server's batch queue was full (TF Serving's max_enqueued_batches).
SHED_OVERLOADED = "overloaded"
SHED_EXPIRED = "expired"
SHED_QUEUE_FULL = "queue_full"
SHED_REASONS = frozenset((SHED_OVERLOADED, SHED_EXPIRED, SHED_QUEUE_FULL))
ROUTE_HEADER = "X-SageMaker-TFS-Route"
MODEL_HEADER = "X-SageMaker-TFS-Model"
VERSION_HEADER = "X-SageMaker-TFS-Version"
SHED_HEADER = "X-SageMaker-TFS-Shed"
