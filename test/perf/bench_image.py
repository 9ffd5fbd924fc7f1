"""Figures of the CPU image, built and run with podman exactly as the container suite does
(test/image/conftest.py says what is substituted): build time cold, cached and after a change
to the Python package; the image size with and without the model server binary; time from
``start.sh`` until ``/ping`` answers 200.

    .venv/bin/python test/perf/bench_image.py [--starts 5]

Cold means no layer of this image in podman's storage (they are removed first); the base
images (debian:trixie-slim, the stand-in tensorflow/serving) stay, as pulled images would.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TEST_DIR = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(TEST_DIR / "image"), str(TEST_DIR)]

from base_images import (  # noqa: E402
    build_model_server_layer,
    ensure_debian_image,
    ensure_stand_in_serving_image,
    host_ca_bundle,
)
from engine import image_info, podman  # noqa: E402
from image_scripts import (  # noqa: E402
    REPO_ROOT,
    Image,
    newest_version,
    script_env,
    start_container,
)
from local_ports import free_port  # noqa: E402

MB = 1000 * 1000


def timed_build(root: Path, image: Image, bin_dir: Path) -> float:
    """``ROOT/scripts/build.sh`` for ``image``; seconds."""
    args = [*image.script_args()]
    ca_bundle = host_ca_bundle()
    if ca_bundle is not None:
        args += ["--ca-bundle", str(ca_bundle)]
    started = time.monotonic()
    result = subprocess.run(
        [str(root / "scripts" / "build.sh"), *args],
        env=script_env(bin_dir),
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise SystemExit(f"build.sh failed:\n{result.stderr[-3000:]}")
    return time.monotonic() - started


def remove_image_and_its_layers(image: Image) -> None:
    short_tag = f"{image.repository}:{image.short_version}-{image.arch}"
    podman("rmi", "--force", image.name, short_tag, check=False)
    podman("image", "prune", "--force")


def copy_with_changed_package(destination: Path) -> Path:
    """A copy of the committed tree with one line added to the Python package."""
    archive = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "archive", "HEAD"], capture_output=True, check=True
    ).stdout
    destination.mkdir()
    subprocess.run(["tar", "-x", "-C", str(destination)], input=archive, check=True)
    init = destination / "container" / "sagemaker_tfs" / "__init__.py"
    init.write_text(init.read_text() + "\n# changed by bench_image.py\n")
    return destination


def model_server_binary_bytes(image: Image) -> int:
    out = podman(
        "run",
        "--rm",
        "--entrypoint",
        "stat",
        image.name,
        "-c",
        "%s",
        "/usr/bin/tensorflow_model_server",
    )
    return int(out.strip())


def start_times(image: Image, bin_dir: Path, count: int) -> list[float]:
    times = []
    models = REPO_ROOT / "test" / "resources" / "models"
    for _ in range(count):
        container = start_container(image, bin_dir, free_port(), models)
        times.append(container.ready_after)
        stopped = container.stop()
        if stopped.returncode != 0:
            raise SystemExit(f"stop.sh failed: {stopped.stderr}")
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=5, help="container starts to time")
    args = parser.parse_args()
    version = newest_version()
    image = Image("sagemaker-tensorflow-serving", version)
    with tempfile.TemporaryDirectory() as tmp:
        bin_dir = Path(tmp) / "bin"
        ensure_debian_image()
        ensure_stand_in_serving_image(version)

        remove_image_and_its_layers(image)
        cold = timed_build(REPO_ROOT, image, bin_dir)
        cached = timed_build(REPO_ROOT, image, bin_dir)
        changed_root = copy_with_changed_package(Path(tmp) / "changed")
        changed_image = Image("sagemaker-tfs-bench-changed", version)
        after_change = timed_build(changed_root, changed_image, bin_dir)
        remove_image_and_its_layers(changed_image)

        size = image_info(image.name)["Size"]
        binary = model_server_binary_bytes(image)
        under_test = Image("sagemaker-tfs-under-test", version)
        build_model_server_layer(image.name, under_test.name, version, host_ca_bundle())
        starts = start_times(under_test, bin_dir, args.starts)

    print(f"image {image.name} (podman {podman('--version').split()[-1]})")
    print(f"build.sh cold (no layers of this image):     {cold:6.1f} s")
    print(f"build.sh again, every layer cached:          {cached:6.1f} s")
    print(f"build.sh after a change to container/:      {after_change:6.1f} s")
    print(f"image size:                                  {size / MB:6.1f} MB")
    print(
        f"  without /usr/bin/tensorflow_model_server:  {(size - binary) / MB:6.1f} MB"
        f" (the stand-in binary here is {binary} bytes)"
    )
    print(
        f"start.sh until /ping 200 ({len(starts)} starts):       "
        f"median {statistics.median(starts):.1f} s, max {max(starts):.1f} s"
        " (the stand-in model server imports TensorFlow)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
