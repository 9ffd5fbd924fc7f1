"""One virtualenv per peer serving framework, cached between runs, sharing one TensorFlow.

Each peer (KServe, BentoML, PyTriton, Ray Serve) gets ``CACHE/NAME`` with its pinned package
installed by pip. TensorFlow itself is not installed again (a copy is 2.6 GB): a directory
``CACHE/tf-share`` holds symlinks to the ``tensorflow`` package and its ``.dist-info`` in the
project's own ``.venv``, and a ``.pth`` file puts that directory on the peer venv's path.
Only TensorFlow comes from there; its small dependencies (NumPy, protobuf, grpcio, Keras...)
and Pillow (the image scenario) are resolved by pip together with the peer's pins, and
``pip check`` afterwards says whether the two agree (its verdict is kept and printed, a
conflict is not hidden).

Run alone to install or update every peer: ``python test/perf/peer_venvs.py [NAME...]``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

CACHE = Path(
    os.environ.get("SAGEMAKER_TFS_PEERS_CACHE", Path.home() / ".cache/sagemaker-tfs-peers")
)
TF_SHARE_PTH = "sagemaker_tfs_shared_tensorflow.pth"


@dataclass(frozen=True)
class PeerPackages:
    """What pip installs for one peer; ``shown`` are the packages whose versions are printed."""

    name: str
    requirements: tuple[str, ...]
    shown: tuple[str, ...]


PEERS = {
    "kserve": PeerPackages(
        "kserve", ("kserve==0.21.0", "pillow"), ("kserve", "fastapi", "uvicorn", "numpy")
    ),
    "bentoml": PeerPackages(
        "bentoml", ("bentoml==1.4.40", "pillow"), ("bentoml", "starlette", "uvicorn", "numpy")
    ),
    "pytriton": PeerPackages(
        "pytriton",
        ("nvidia-pytriton==0.7.0", "pillow"),
        ("nvidia-pytriton", "tritonclient", "numpy"),
    ),
    "ray": PeerPackages(
        "ray", ("ray[serve]==2.60.0", "pillow"), ("ray", "fastapi", "uvicorn", "numpy")
    ),
}


def project_site_packages() -> Path:
    """The site-packages of the project's .venv (the one running this script), TensorFlow's home."""
    spec = importlib.util.find_spec("tensorflow")
    if spec is None or spec.origin is None:
        raise SystemExit("TensorFlow is not importable here: run with the project's .venv python")
    return Path(spec.origin).resolve().parent.parent


def tensorflow_requirements() -> list[str]:
    """TensorFlow's own runtime requirements (no extras), for pip to resolve with the peer's."""
    wanted = []
    for requirement in importlib.metadata.requires("tensorflow") or []:
        if "extra ==" not in requirement:
            wanted.append(requirement.split(";")[0].strip())
    return wanted


def tf_share() -> Path:
    """``CACHE/tf-share``: symlinks to the one TensorFlow (package and metadata), nothing else."""
    share = CACHE / "tf-share"
    share.mkdir(parents=True, exist_ok=True)
    site = project_site_packages()
    version = importlib.metadata.version("tensorflow")
    for entry in ("tensorflow", f"tensorflow-{version}.dist-info"):
        link = share / entry
        if not link.exists():
            link.symlink_to(site / entry)
    return share


def venv_python(name: str) -> Path:
    return CACHE / name / "bin" / "python"


def install(name: str, quiet: bool = True) -> dict:
    """Creates or updates the peer's venv; returns its versions and ``pip check``'s verdict."""
    peer = PEERS[name]
    venv = CACHE / name
    marker = venv / "installed.json"
    wanted = list(peer.requirements) + tensorflow_requirements()
    if marker.exists():
        done = json.loads(marker.read_text())
        if done.get("requirements") == wanted:
            return done
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / TF_SHARE_PTH).write_text(f"{tf_share()}\n")
    pip = [str(venv_python(name)), "-m", "pip"]
    subprocess.run([*pip, "install", "--upgrade", "pip"], check=True, capture_output=quiet)
    subprocess.run([*pip, "install", *wanted], check=True, capture_output=quiet)
    check = subprocess.run([*pip, "check"], capture_output=True, text=True)
    done = {
        "requirements": wanted,
        "versions": installed_versions(name, (*peer.shown, "tensorflow", "protobuf", "grpcio")),
        "pip_check": check.stdout.strip() or check.stderr.strip(),
        "pip_check_ok": check.returncode == 0,
    }
    marker.write_text(json.dumps(done, indent=1))
    return done


def installed_versions(name: str, packages: tuple[str, ...]) -> dict[str, str]:
    """The versions the peer's venv has of the packages asked (``-`` if absent)."""
    code = (
        "import importlib.metadata as m, json, sys\n"
        "out = {}\n"
        "for p in sys.argv[1:]:\n"
        "    try: out[p] = m.version(p)\n"
        "    except m.PackageNotFoundError: out[p] = '-'\n"
        "print(json.dumps(out))\n"
    )
    result = subprocess.run(
        [str(venv_python(name)), "-c", code, *packages], check=True, capture_output=True, text=True
    )
    return json.loads(result.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("peers", nargs="*", default=list(PEERS), help=f"some of {list(PEERS)}")
    parser.add_argument("--verbose", action="store_true", help="show pip's output")
    args = parser.parse_args()
    unknown = set(args.peers) - set(PEERS)
    if unknown:
        parser.error(f"unknown peers {sorted(unknown)}")
    for name in args.peers:
        print(name, json.dumps(install(name, quiet=not args.verbose), indent=1), flush=True)


if __name__ == "__main__":
    main()
