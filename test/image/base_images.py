"""The images the Dockerfiles start from, made here because no image registry is reachable.

``debian:trixie-slim`` is made as the official Debian images are: ``debootstrap
--variant=minbase`` from the Debian archive, then the same minimizing steps (apt and dpkg
settings for containers, no documentation, man pages or locales, empty caches and logs, no
services started by package installs), imported with ``CMD ["bash"]``. The tarball is kept in
a cache directory between runs, so a machine makes it once.

``tensorflow/serving:<full>`` is a stand-in: the real release image cannot be pulled, and its
``/usr/bin/tensorflow_model_server`` (the only file the Dockerfiles copy out of it) is here a
small script that runs the project's Python model server with the same flags. That server
needs TensorFlow, which a single copied file cannot carry: ``Dockerfile.model-server-layer``
adds it on top of the built image, in ``/opt/model-server-packages`` apart from ``/opt/venv``,
for the tests only.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from engine import HERE, image_exists, podman

log = logging.getLogger(__name__)

DEBIAN_MIRROR = "http://deb.debian.org/debian"
DEBIAN_SECURITY_MIRROR = "http://deb.debian.org/debian-security"
DEBIAN_SUITE = "trixie"
DEBIAN_IMAGE = "docker.io/library/debian:trixie-slim"
SERVING_REPOSITORY = "docker.io/tensorflow/serving"
STAND_IN_DIR = HERE / "stand_in"

# What the official -slim images leave out (dpkg path-exclude), and the files kept anyway.
SLIM_EXCLUDES = (
    "/usr/share/doc/*",
    "/usr/share/groff/*",
    "/usr/share/info/*",
    "/usr/share/linda/*",
    "/usr/share/lintian/overrides/*",
    "/usr/share/locale/*",
    "/usr/share/man/*",
)
SLIM_INCLUDES = ("/usr/share/doc/*/copyright",)

APT_SETTINGS = {
    # apt keeps no downloaded packages or binary caches in image layers
    "docker-clean": (
        'DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb'
        ' /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };\n'
        'APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb'
        ' /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };\n'
        'Dir::Cache::pkgcache "";\nDir::Cache::srcpkgcache "";\n'
    ),
    "docker-no-languages": 'Acquire::Languages "none";\n',
    "docker-gzip-indexes": (
        'Acquire::GzipIndexes "true";\nAcquire::CompressionTypes::Order:: "gz";\n'
    ),
    "docker-autoremove-suggests": 'Apt::AutoRemove::SuggestsImportant "false";\n',
}

SOURCES = f"""Types: deb
URIs: {DEBIAN_MIRROR}
Suites: {DEBIAN_SUITE} {DEBIAN_SUITE}-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: {DEBIAN_SECURITY_MIRROR}
Suites: {DEBIAN_SUITE}-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""


def cache_dir() -> Path:
    """Where the Debian tarball and pip downloads are kept between runs."""
    default = Path(os.environ.get("HOME", "/root")) / ".cache" / "sagemaker-tfs-image"
    path = Path(os.environ.get("SAGEMAKER_TFS_IMAGE_CACHE", default))
    path.mkdir(parents=True, exist_ok=True)
    return path


def ensure_debian_image() -> None:
    """``debian:trixie-slim`` in podman's storage, from the cached tarball or made anew."""
    if image_exists(DEBIAN_IMAGE):
        return
    tarball = cache_dir() / f"debian-{DEBIAN_SUITE}-slim.tar"
    if not tarball.exists():
        make_debian_tarball(tarball)
    podman("import", "--change", 'CMD ["bash"]', str(tarball), DEBIAN_IMAGE)
    log.info("imported %s from %s", DEBIAN_IMAGE, tarball)


def make_debian_tarball(tarball: Path) -> None:
    with tempfile.TemporaryDirectory(dir=tarball.parent) as work:
        rootfs = Path(work) / "rootfs"
        subprocess.run(
            ["debootstrap", "--variant=minbase", DEBIAN_SUITE, str(rootfs), DEBIAN_MIRROR],
            check=True,
            capture_output=True,
        )
        minimize(rootfs)
        partial = tarball.with_suffix(".partial")
        subprocess.run(
            ["tar", "--numeric-owner", "--xattrs", "-C", str(rootfs), "-cf", str(partial), "."],
            check=True,
        )
        partial.rename(tarball)
    log.info("made %s with debootstrap", tarball)


def minimize(rootfs: Path) -> None:
    """The official images' container settings and -slim removals, applied to a rootfs."""
    apt_conf = rootfs / "etc/apt/apt.conf.d"
    for name, text in APT_SETTINGS.items():
        (apt_conf / name).write_text(text)
    dpkg_excludes = [f"path-exclude {p}" for p in SLIM_EXCLUDES]
    dpkg_excludes += [f"path-include {p}" for p in SLIM_INCLUDES]
    (rootfs / "etc/dpkg/dpkg.cfg.d/docker").write_text("\n".join(dpkg_excludes) + "\n")
    policy = rootfs / "usr/sbin/policy-rc.d"  # no service starts during package installs
    policy.write_text("#!/bin/sh\nexit 101\n")
    policy.chmod(0o755)
    (rootfs / "etc/apt/sources.list").unlink(missing_ok=True)
    (rootfs / "etc/apt/sources.list.d/debian.sources").write_text(SOURCES)
    remove_excluded_files(rootfs)
    for pattern in (
        "var/lib/apt/lists/*",
        "var/cache/apt/*.bin",
        "var/cache/apt/archives/*.deb",
        "var/log/*.log",
        "var/log/apt/*",
        "var/cache/ldconfig/aux-cache",
    ):
        for path in rootfs.glob(pattern):
            if path.is_file() or path.is_symlink():
                path.unlink()
    (rootfs / "etc/machine-id").write_text("")
    for name in ("etc/hostname", "etc/resolv.conf"):
        (rootfs / name).unlink(missing_ok=True)


def remove_excluded_files(rootfs: Path) -> None:
    keep = {path for pattern in SLIM_INCLUDES for path in rootfs.glob(pattern.lstrip("/"))}
    for pattern in SLIM_EXCLUDES:
        for path in rootfs.glob(pattern.lstrip("/")):
            if path.is_dir() and not path.is_symlink():
                for inner in sorted(path.rglob("*"), reverse=True):
                    if inner not in keep and (inner.is_file() or inner.is_symlink()):
                        inner.unlink()
                    elif inner.is_dir() and not any(inner.iterdir()):
                        inner.rmdir()
                if not any(path.iterdir()):
                    path.rmdir()
            elif path not in keep:
                path.unlink()


def ensure_stand_in_serving_image(version: str) -> str:
    """``tensorflow/serving:<version>`` holding the stand-in model server script."""
    name = f"{SERVING_REPOSITORY}:{version}"
    podman(
        "build",
        "--file",
        str(STAND_IN_DIR / "Dockerfile.serving"),
        "--tag",
        name,
        str(STAND_IN_DIR),
    )
    return name


def build_model_server_layer(
    image: str, tag: str, tensorflow_version: str, ca_bundle: Path | None
) -> None:
    """The built image plus TensorFlow for the stand-in model server (test-only layer)."""
    pip_cache = cache_dir() / "pip"
    pip_cache.mkdir(exist_ok=True)
    args = [
        "build",
        *("--build-arg", f"IMAGE={image}"),
        *("--build-arg", f"TENSORFLOW_VERSION={tensorflow_version}"),
        *("--volume", f"{pip_cache}:/root/.cache/pip"),
    ]
    if ca_bundle is not None:
        args += ["--secret", f"id=pip-ca,src={ca_bundle}"]
    podman(
        *args,
        "--file",
        str(STAND_IN_DIR / "Dockerfile.model-server-layer"),
        "--tag",
        tag,
        str(STAND_IN_DIR),
    )


def host_ca_bundle() -> Path | None:
    """The host's CA bundle, which trusts the proxy in front of the package index here."""
    path = Path("/etc/ssl/certs/ca-certificates.crt")
    return path if path.exists() else None


def require_tools() -> list[str]:
    """Tools the image tests need that are not on PATH (scripts/bootstrap.sh --engine)."""
    return [tool for tool in ("podman", "debootstrap", "runc") if shutil.which(tool) is None]
