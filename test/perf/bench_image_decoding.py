"""How long the service takes to turn image requests into a batch (``registry.decode_request``,
pixels widened), in this process: scenario 2's ten 512x512 JPEGs as an image stream,
scenario 1's one 224x224 JPEG, and streams of small images. ``--container`` measures another
version of the code (``git archive BASE container | tar -x -C /tmp/base``), for an A/B;
``--one-thread`` and ``--always-on-cores`` force where the images are decoded (see
``image_inputs.DECODE_ON_CORES_MIN_BYTES``)::

    .venv/bin/python test/perf/bench_image_decoding.py [--container /tmp/base/container]

Prints the median of ``--calls`` calls per request, the requests alternating.
"""

from __future__ import annotations

import argparse
import importlib
import io
import statistics
import sys
import time
from pathlib import Path
from typing import Any

PERF = Path(__file__).resolve().parent

DT_FLOAT = 1


def small_png(seed: int) -> bytes:
    """A 28x28 grayscale PNG of noise, MNIST-sized."""
    import numpy as np
    from PIL import Image

    pixels = np.random.default_rng(seed).integers(0, 256, (28, 28), np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--container", help="the container/ directory to import the code from")
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--one-thread", action="store_true")
    parser.add_argument("--always-on-cores", action="store_true")
    args = parser.parse_args()
    if args.container:
        sys.path.insert(0, str(Path(args.container).resolve()))
    sys.path.insert(1, str(PERF))
    from bench_fast_paths import image_stream, photo_like_jpeg
    from sagemaker_tfs.wire.signatures import TensorSpec

    try:
        from sagemaker_tfs.service.codecs import image_inputs
        from sagemaker_tfs.service.codecs import registry as decoder
    except ImportError:  # a version from before issue 56's subpackages (A/B runs)
        try:
            from sagemaker_tfs.service import image_inputs
            from sagemaker_tfs.service import inputs as decoder
        except ImportError:  # a version from before payloads.py was split
            from sagemaker_tfs.service import payloads as decoder

            image_inputs = decoder

    def decode(body: bytes, content_type: str, inputs: dict, options: Any) -> Any:
        if hasattr(decoder, "decode_inputs"):  # a version from before issue 40
            return decoder.decode_inputs(body, content_type, inputs, options)
        return decoder.decode_request(body, content_type, inputs, options).widened()

    if args.one_thread:
        if hasattr(image_inputs, "usable_cores"):  # native_threads folded in (issue 56)
            image_inputs.usable_cores = lambda: 1
        else:
            native_threads = importlib.import_module(f"{image_inputs.__package__}.native_threads")
            native_threads.usable_cores = lambda: 1
    if args.always_on_cores:
        image_inputs.DECODE_ON_CORES_MIN_BYTES = 0

    print(f"code from {Path(sys.modules['sagemaker_tfs'].__file__).parents[1]}")
    requests = {
        "10 JPEGs 512x512, image stream": (
            image_stream([photo_like_jpeg(512, seed=10 + i) for i in range(10)]),
            "application/x-image-stream",
            {"images": TensorSpec("images", DT_FLOAT, (-1, 512, 512, 3))},
        ),
        "1 JPEG 224x224": (
            photo_like_jpeg(224, seed=1),
            "image/jpeg",
            {"input_1": TensorSpec("input_1", DT_FLOAT, (-1, 224, 224, 3))},
        ),
        "4 JPEGs 224x224, image stream": (
            image_stream([photo_like_jpeg(224, seed=20 + i) for i in range(4)]),
            "application/x-image-stream",
            {"input_1": TensorSpec("input_1", DT_FLOAT, (-1, 224, 224, 3))},
        ),
        "64 PNGs 28x28, image stream": (
            image_stream([small_png(seed) for seed in range(64)]),
            "application/x-image-stream",
            {"x": TensorSpec("x", DT_FLOAT, (-1, 28, 28, 1))},
        ),
    }
    options = image_inputs.ImageOptions()
    latencies: dict[str, list[float]] = {label: [] for label in requests}
    for _ in range(args.calls):
        for label, (body, content_type, inputs) in requests.items():
            started = time.perf_counter()
            decode(body, content_type, inputs, options)
            latencies[label].append(1000 * (time.perf_counter() - started))
    for label, values in latencies.items():
        print(f"{label:32s} p50 {statistics.median(values):7.3f} ms")


if __name__ == "__main__":
    main()
