"""Generate ``container/sagemaker_tfs/wire/protos/tfs_descriptors.pb`` from the installed packages.

The Python service must not import TensorFlow, yet it needs TF Serving's messages. This script
(run where tensorflow and tensorflow-serving-api are installed) collects the file descriptors of
TF Serving's prediction and model services and everything they import, and writes them as one
serialized ``FileDescriptorSet`` (dependencies first), which ``sagemaker_tfs.wire.protos`` loads.

Usage: ``python scripts/make_protos.py [--check]``; ``--check`` exits 1 if the file is stale.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import FileDescriptor

OUTPUT = (
    Path(__file__).resolve().parent.parent
    / "container/sagemaker_tfs/wire/protos/tfs_descriptors.pb"
)


def root_descriptors() -> list[FileDescriptor]:
    """The TF Serving files whose messages and services the service uses."""
    from tensorflow_serving.apis import model_service_pb2, prediction_service_pb2

    return [prediction_service_pb2.DESCRIPTOR, model_service_pb2.DESCRIPTOR]


def files_in_dependency_order(roots: list[FileDescriptor]) -> list[FileDescriptor]:
    """Every file reachable from ``roots``, each one after the files it imports."""
    ordered: list[FileDescriptor] = []
    seen: set[str] = set()

    def visit(file: FileDescriptor) -> None:
        if file.name in seen:
            return
        seen.add(file.name)
        for dependency in file.dependencies:
            visit(dependency)
        ordered.append(file)

    for root in roots:
        visit(root)
    return ordered


def build_descriptor_set() -> bytes:
    """Serialize the descriptor set deterministically."""
    descriptor_set = descriptor_pb2.FileDescriptorSet()
    for file in files_in_dependency_order(root_descriptors()):
        file.CopyToProto(descriptor_set.file.add())
    return descriptor_set.SerializeToString(deterministic=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the committed file is stale")
    args = parser.parse_args(argv)
    generated = build_descriptor_set()
    if args.check:
        current = OUTPUT.read_bytes() if OUTPUT.exists() else b""
        if current != generated:
            print(f"{OUTPUT} is out of date; run scripts/make_protos.py", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_bytes(generated)
    print(f"wrote {OUTPUT} ({len(generated)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
