"""What reading a request at the service's edge costs, in-process (no network, no model server).

Per request: ``request.parse_request`` (every header once, the target model), the model
servers to try (``InstanceRotation``) and the handler's ``Context``. Prints microseconds per
request; ``--container DIR`` imports another version's code for an A/B (one from before the
parsed request is timed as ``routing.route`` + ``InstancePicker.rotation`` + its
``build_context``).

Usage: ``.venv/bin/python test/perf/bench_request_edge.py [--calls 20000] [--container DIR]``
"""

from __future__ import annotations

import argparse
import importlib
import sys
import timeit
from pathlib import Path
from types import ModuleType

HEADERS = {
    "Content-Type": "application/json; charset=utf-8",
    "Accept": "application/json",
    "X-Amzn-SageMaker-Custom-Attributes": "tfs-model-name=m,tfs-model-version=1",
}

# Where issue 56's subpackages put the modules this times (an A/B across the move imports both).
MOVED = {
    "context": "handlers.context",
    "connections": "routing.connections",
    "model_servers": "routing.model_servers",
}


def service_module(name: str) -> ModuleType:
    """``sagemaker_tfs.service``'s module ``name`` in this version's layout."""
    try:
        return importlib.import_module(f"sagemaker_tfs.service.{MOVED[name]}")
    except ModuleNotFoundError:  # a version from before the subpackages
        return importlib.import_module(f"sagemaker_tfs.service.{name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--container", help="the container/ directory to import the code from")
    args = parser.parse_args()
    if args.container:
        sys.path.insert(0, str(Path(args.container).resolve()))
    import falcon
    import falcon.testing
    from sagemaker_tfs.ports import Instance

    env = falcon.testing.create_environ("/invocations", method="POST", headers=HEADERS, body="[1]")
    req = falcon.Request(env)
    instances = [Instance(9000, 8501), Instance(9002, 8503)]
    try:
        from sagemaker_tfs.service.request import parse_request

        context, model_servers = service_module("context"), service_module("model_servers")
        picker = model_servers.InstancePicker(instances)
        channels = service_module("connections").Channels()

        def one() -> None:
            request = parse_request(req, 3, "m", None)
            context.build_context(request, model_servers.InstanceRotation(picker, channels).first())

    except ImportError:  # before the parsed request
        from sagemaker_tfs.service.context import build_context
        from sagemaker_tfs.service.routing import InstancePicker, route

        picker = InstancePicker(instances)
        attributes = "X-Amzn-SageMaker-Custom-Attributes"

        def one() -> None:
            target = route(req.get_header(attributes), "m")
            instance = picker.rotation()[0]
            build_context(target, instance.grpc_port, instance.rest_port, None,
                          req.get_header(attributes), req.content_type,
                          req.get_header("Accept"), 3)  # fmt: skip

    seconds = timeit.timeit(one, number=args.calls)
    print(f"code from {Path(sys.modules['sagemaker_tfs'].__file__).parents[1]}")
    print(f"edge per request: {seconds / args.calls * 1e6:.1f} us ({args.calls} calls)")


if __name__ == "__main__":
    main()
