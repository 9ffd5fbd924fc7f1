"""Static checks of docker/<short>/Dockerfile.*: each copies and installs what the serving
stack needs, so that a missing file or package fails here rather than at `docker build`
(there is no Docker daemon here). The build context is also rebuilt from .dockerignore and the
project wheel is built from it, as the image's venv stage does."""

from __future__ import annotations

import ast
import importlib.util
import re
import shutil
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from script_helpers import (
    REPO_ROOT,
    build_context,
    dockerignore_includes,
    dockerignore_patterns,
    known_versions,
    parse_dockerfile,
    short,
)

DOCKER_DIR = REPO_ROOT / "docker"
ARCHES = ("cpu", "gpu", "eia")
# Where libnginx-mod-http-js installs the njs module: the same path on Debian 13 (cpu, eia)
# and Ubuntu 24.04 (gpu).
NJS_MODULE = "/usr/lib/nginx/modules/ngx_http_js_module.so"
EI_ARTIFACT = "docker/build_artifacts/amazonei_tensorflow_model_server"


def releases() -> list[tuple[str, str, str]]:
    rows = []
    for line in (DOCKER_DIR / "versions.txt").read_text().splitlines():
        fields = line.split("#", 1)[0].split()
        if fields:
            rows.append((fields[0], fields[1], fields[2]))
    return rows


CASES = [(full, cuda, cudnn, arch) for full, cuda, cudnn in releases() for arch in ARCHES]


def dockerfile(full: str, arch: str) -> Path:
    return DOCKER_DIR / short(full) / f"Dockerfile.{arch}"


def expected_bases(arch: str, cuda: str) -> tuple[str, str, str]:
    """(venv stage base, final base, their Python): one distribution release per image, so
    that the venv's interpreter is the final image's system Python."""
    if arch == "gpu":
        return "ubuntu:24.04", f"nvidia/cuda:{cuda}-runtime-ubuntu24.04", "python3.12"
    return "debian:trixie-slim", "debian:trixie-slim", "python3.13"


def runtime_stage(path: Path):  # type: ignore[no-untyped-def]
    """The stage that is the image (the smoke stage after it only checks it)."""
    return next(s for s in parse_dockerfile(path) if s.name == "runtime")


def lock_pins(path: Path) -> dict[str, tuple[str, list[str]]]:
    """``name -> (version, sha256 hashes)`` of a lock written by scripts/lock.sh (uv's
    requirements format: ``name==version ; marker \\`` then ``--hash=sha256:...`` lines)."""
    pins: dict[str, tuple[str, list[str]]] = {}
    for entry in re.split(r"\n(?=\S)", path.read_text()):
        text = " ".join(line.split("#", 1)[0] for line in entry.splitlines()).replace("\\", " ")
        if not text.strip():
            continue
        requirement, *options = text.split("--hash=")
        name, _, version = requirement.split(";")[0].strip().partition("==")
        assert version, f"{path.name}: {requirement.strip()!r} is not an exact pin"
        pins[normalized(name)] = (version.strip(), [o.strip() for o in options])
    return pins


def apt_packages(run: str) -> list[str]:
    """The packages of an `apt-get install --no-install-recommends ...` RUN."""
    return run.split("--no-install-recommends", 1)[1].split("&&")[0].split()


def test_dockerfiles_are_generated_from_the_template_and_up_to_date() -> None:
    result = subprocess.run(
        [sys.executable, str(DOCKER_DIR / "generate.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    for full in known_versions():
        for arch in ARCHES:
            assert dockerfile(full, arch).is_file()


def test_the_host_tensorflow_serving_api_is_one_of_the_image_versions() -> None:
    from importlib.metadata import version

    assert short(version("tensorflow-serving-api")) in {short(v) for v in known_versions()}


@pytest.mark.parametrize(("full", "cuda", "cudnn", "arch"), CASES)
def test_model_server_stage(full: str, cuda: str, cudnn: str, arch: str) -> None:
    stages = parse_dockerfile(dockerfile(full, arch))
    model_server = next(s for s in stages if s.name == "model-server")
    if arch == "eia":
        assert model_server.base == "scratch"
        assert model_server.all("COPY") == [f"{EI_ARTIFACT} /usr/bin/tensorflow_model_server"]
    else:
        suffix = "-gpu" if arch == "gpu" else ""
        assert model_server.base == f"tensorflow/serving:{full}{suffix}"
    final = runtime_stage(dockerfile(full, arch))
    assert (
        "--from=model-server /usr/bin/tensorflow_model_server /usr/bin/tensorflow_model_server"
        in final.all("COPY")
    )


@pytest.mark.parametrize(("full", "cuda", "cudnn", "arch"), CASES)
def test_venv_stage_builds_with_the_python_of_the_final_images_distribution(
    full: str, cuda: str, cudnn: str, arch: str
) -> None:
    venv_base, _, python = expected_bases(arch, cuda)
    venv = next(s for s in parse_dockerfile(dockerfile(full, arch)) if s.name == "venv")
    assert venv.base == venv_base
    install, build = venv.all("RUN")
    assert apt_packages(install) == [python, f"{python}-venv"]
    assert f"{python} -m venv /tmp/build-env " in build
    assert f"{python} -m venv /opt/venv " in build


@pytest.mark.parametrize(("full", "cuda", "cudnn", "arch"), CASES)
def test_venv_stage_builds_the_project_wheel_with_pinned_dependencies(
    full: str, cuda: str, cudnn: str, arch: str
) -> None:
    venv = next(s for s in parse_dockerfile(dockerfile(full, arch)) if s.name == "venv")
    copies = venv.all("COPY")
    assert "setup.py pyproject.toml ./" in copies
    assert "container/ container/" in copies
    assert "docker/requirements.lock docker/build-requirements.lock /tmp/" in copies
    (run,) = venv.all("RUN")[1:]
    hashed = "pip install --require-hashes --only-binary=:all: -r"
    assert f"/tmp/build-env/bin/{hashed} /tmp/build-requirements.lock" in run
    assert "pip wheel --no-deps --no-build-isolation --wheel-dir /tmp/wheels ." in run
    assert f"/opt/venv/bin/{hashed} /tmp/requirements.lock" in run
    assert "pip install --no-deps --no-index /tmp/wheels/sagemaker_tfs-*.whl" in run
    assert run.index("sagemaker_tfs-*.whl") < run.index("/opt/venv/bin/pip check")
    assert "PIP_NO_CACHE_DIR=1" in " ".join(venv.all("ENV"))


@pytest.mark.parametrize(("full", "cuda", "cudnn", "arch"), CASES)
def test_every_download_pip_makes_is_hash_checked(full: str, cuda: str, cudnn: str, arch: str):
    """pip installs only from the hash-locked files, or our own wheel from no index at all;
    nothing is installed without its dependencies from an index (tensorflow-serving-api
    once was, and could not be imported without TensorFlow)."""
    text = " ".join(
        run for stage in parse_dockerfile(dockerfile(full, arch)) for run in stage.all("RUN")
    )
    installs = re.findall(r"pip install ([^&]*)", text)
    assert len(installs) == 3, installs
    for arguments in installs:
        if "--no-index" not in arguments:
            assert arguments.startswith("--require-hashes --only-binary=:all: -r /tmp/"), arguments
    assert "tensorflow-serving-api" not in dockerfile(full, arch).read_text()


@pytest.mark.parametrize(("full", "cuda", "cudnn", "arch"), CASES)
def test_the_image_carries_its_sbom(full: str, cuda: str, cudnn: str, arch: str) -> None:
    """cyclonedx-py writes /opt/venv's part in the venv stage; the runtime stage adds the
    distribution's packages and the model server binary, with the image's own Python."""
    venv = next(s for s in parse_dockerfile(dockerfile(full, arch)) if s.name == "venv")
    assert "/tmp/build-env/bin/cyclonedx-py environment" in venv.all("RUN")[-1]
    assert "--output-file /tmp/sbom.cdx.json /opt/venv/bin/python" in venv.all("RUN")[-1]
    runtime = runtime_stage(dockerfile(full, arch))
    sbom = "/usr/share/sagemaker-tfs/sbom.cdx.json"
    assert f"--from=venv /tmp/sbom.cdx.json {sbom}" in runtime.all("COPY")
    (completing,) = [run for run in runtime.all("RUN") if "sbom_image_parts.py" in run]
    assert completing.startswith("--mount=type=bind,source=docker/sbom_image_parts.py,")
    source = EI_ARTIFACT if arch == "eia" else f"tensorflow/serving:{full}"
    assert f"--model-server {source}" in completing and completing.endswith(sbom)


@pytest.mark.parametrize(("full", "cuda", "cudnn", "arch"), CASES)
def test_the_last_stage_smoke_tests_the_image(full: str, cuda: str, cudnn: str, arch: str):
    """The image that is tagged is the runtime stage plus the smoke test's (empty) layer, so
    `docker build` cannot produce an image whose check failed."""
    smoke = parse_dockerfile(dockerfile(full, arch))[-1]
    assert (smoke.base, smoke.name) == ("runtime", "smoke")
    assert [i.keyword for i in smoke.instructions] == ["RUN"]
    assert smoke.all("RUN") == [
        "--mount=type=bind,source=docker/smoke_test.sh,target=/tmp/smoke_test.sh"
        " sh /tmp/smoke_test.sh"
    ]
    script = (DOCKER_DIR / "smoke_test.sh").read_text()
    for check in ("/usr/bin/tensorflow_model_server --version", "nginx -t", "import sagemaker_tfs"):
        assert check in script


@pytest.mark.parametrize(("full", "cuda", "cudnn", "arch"), CASES)
def test_final_stage_has_what_the_stack_runs(full: str, cuda: str, cudnn: str, arch: str):
    from sagemaker_tfs.supervisor.nginx_config import NJS_MODULE_CANDIDATES

    _, final_base, python = expected_bases(arch, cuda)
    final = runtime_stage(dockerfile(full, arch))
    assert final.base == final_base
    (install,) = [run for run in final.all("RUN") if "apt-get install" in run]
    packages = apt_packages(install)
    for package in (python, "nginx", "libnginx-mod-http-js", "ca-certificates"):
        assert package in packages
    if arch == "gpu":
        assert f"libcudnn9-cuda-12={cudnn}-1" in packages
    assert "rm -rf /var/lib/apt/lists/*" in install
    assert NJS_MODULE in NJS_MODULE_CANDIDATES, "nginx_config will not find the module"
    assert "--from=venv /opt/venv /opt/venv" in final.all("COPY")
    env = " ".join(final.all("ENV"))
    assert "PATH=/opt/venv/bin:$PATH" in env
    assert "DEBIAN_FRONTEND" not in env, "build-time setting: ARG, not ENV"
    assert final.all("CMD") == ['["serve"]']
    assert final.all("EXPOSE") == ["8080"]
    labels = " ".join(final.all("LABEL"))
    assert "com.amazonaws.sagemaker.capabilities.accept-bind-to-port=true" in labels
    assert "com.amazonaws.sagemaker.capabilities.multi-models=true" in labels
    assert "com.amazonaws.sagemaker.capabilities.bidirectional-streaming=true" in labels
    assert not final.all("ENTRYPOINT")


@pytest.mark.parametrize(("full", "cuda", "cudnn", "arch"), CASES)
def test_no_secrets_downloads_or_build_tools_in_the_final_image(
    full: str, cuda: str, cudnn: str, arch: str
) -> None:
    path = dockerfile(full, arch)
    text = path.read_text()
    assert not re.search(r"(?i)(AWS_ACCESS|AWS_SECRET|PASSWORD|TOKEN)", text)
    stages = parse_dockerfile(path)
    assert not any(s.all("ADD") for s in stages), "ADD of URLs/archives: use COPY"
    final_runs = " ".join(runtime_stage(path).all("RUN") + stages[-1].all("RUN"))
    _, _, python = expected_bases(arch, cuda)
    for tool in ("gcc", "build-essential", f"{python}-venv", "python3-pip", "curl", "wget"):
        assert tool not in final_runs.split()


@pytest.mark.parametrize(("full", "cuda", "cudnn", "arch"), CASES)
def test_pip_ca_bundle_is_an_optional_build_secret_of_the_pip_step_only(
    full: str, cuda: str, cudnn: str, arch: str
) -> None:
    """Behind a TLS proxy pip trusts the secret pip-ca, mounted for that one RUN step; without
    it pip keeps its own bundle. No PIP_CERT in ARG or ENV: nothing of it reaches a layer."""
    stages = parse_dockerfile(dockerfile(full, arch))
    runs_with_secret = [
        (stage.name, run) for stage in stages for run in stage.all("RUN") if "pip-ca" in run
    ]
    assert len(runs_with_secret) == 1
    stage_name, run = runs_with_secret[0]
    assert stage_name == "venv"
    assert run.startswith("--mount=type=secret,id=pip-ca ")
    assert "if [ -f /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca; fi" in run
    assert run.index("PIP_CERT") < run.index("pip install")
    for stage in stages:
        assert not any("PIP_CERT" in line for line in stage.all("ENV") + stage.all("ARG"))


@pytest.mark.parametrize(("full", "cuda", "cudnn", "arch"), CASES)
def test_no_stage_copies_a_certificate_into_an_image(
    full: str, cuda: str, cudnn: str, arch: str
) -> None:
    for stage in parse_dockerfile(dockerfile(full, arch)):
        for source in stage.all("COPY") + stage.all("ADD"):
            assert "cert" not in source.lower() and "ca-" not in source.lower(), source


def setup_py_calls() -> dict[str, ast.expr]:
    """Keyword arguments of setup() in setup.py, read without running it."""
    tree = ast.parse((REPO_ROOT / "setup.py").read_text())
    call = next(
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "setup"
    )
    return {kw.arg: kw.value for kw in call.keywords if kw.arg}


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_runtime_dependency_is_pinned_in_the_lock() -> None:
    """A dependency missing from requirements.lock fails `pip check` at `docker build`, and a
    pin outside setup.py's range would too: both are caught here first."""
    requires = ast.literal_eval(setup_py_calls()["install_requires"])
    pins = lock_pins(DOCKER_DIR / "requirements.lock")
    for text in requires:
        requirement = Requirement(text)
        name = normalized(requirement.name)
        assert name in pins, f"{name} (setup.py) is not pinned in requirements.lock"
        version = pins[name][0]
        assert requirement.specifier.contains(version), f"lock {name}=={version} vs {text}"


@pytest.mark.parametrize("name", ["requirements", "build-requirements"])
def test_the_locks_hash_every_pin_and_follow_their_inputs(name: str) -> None:
    """Each pin carries sha256 hashes (pip --require-hashes refuses the file otherwise), and
    each exact pin of the .in file is the lock's: a lock not compiled again after the .in
    changed (scripts/lock.sh) fails here."""
    pins = lock_pins(DOCKER_DIR / f"{name}.lock")
    for package, (_, hashes) in pins.items():
        assert hashes and all(re.fullmatch(r"sha256:[0-9a-f]{64}", h) for h in hashes), package
    for line in (DOCKER_DIR / f"{name}.in").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            requirement = Requirement(line)
            (pinned,) = [str(spec.version) for spec in requirement.specifier]
            assert pins[normalized(requirement.name)][0] == pinned, line


def dependency_closure(requirements: list[str]) -> set[str]:
    """Names of the distributions ``pip install`` pulls in for ``requirements``, extras
    included, read from what is installed here (the test environment has them all)."""
    seen: set[str] = set()
    pending = [Requirement(text) for text in requirements]
    while pending:
        requirement = pending.pop()
        name = normalized(requirement.name)
        if name in seen:
            continue
        seen.add(name)
        for text in metadata.distribution(name).requires or []:
            dependency = Requirement(text)
            extras = [""] + sorted(requirement.extras)
            if dependency.marker is None or any(
                dependency.marker.evaluate({"extra": extra}) for extra in extras
            ):
                pending.append(dependency)
    return seen


def test_the_lock_pins_every_transitive_dependency() -> None:
    requires = ast.literal_eval(setup_py_calls()["install_requires"])
    assert dependency_closure(requires) <= set(lock_pins(DOCKER_DIR / "requirements.lock"))


def test_serve_is_a_console_script_of_the_package() -> None:
    scripts = ast.literal_eval(setup_py_calls()["entry_points"])["console_scripts"]
    assert any(re.match(r"^serve\s*=", entry) for entry in scripts)


def test_dockerignore_keeps_the_context_small_but_complete() -> None:
    patterns = dockerignore_patterns()
    needed_files = ("setup.py", "pyproject.toml", EI_ARTIFACT) + tuple(
        f"docker/{name}"
        for name in (
            "requirements.lock",
            "build-requirements.lock",
            "sbom_image_parts.py",
            "smoke_test.sh",
        )
    )
    for needed in needed_files:
        assert dockerignore_includes(needed, patterns), needed
    assert dockerignore_includes("container/sagemaker_tfs/nginx/nginx.conf.template", patterns)
    for excluded in (".venv/bin/python", ".git/HEAD", "test/resources/models/x", "README.md"):
        assert not dockerignore_includes(excluded, patterns), excluded
    assert not dockerignore_includes("container/sagemaker_tfs/__pycache__/x.pyc", patterns)


@pytest.mark.timeout(300)
def test_wheel_built_from_the_build_context_holds_the_stack(tmp_path: Path) -> None:
    """What the venv stage does (pip wheel from the context), minus Docker."""
    context = build_context(tmp_path / "context")
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation"]
        + ["--wheel-dir", str(wheels), str(context)],
        check=True,
        capture_output=True,
        timeout=240,
    )
    (wheel,) = wheels.glob("sagemaker_tfs-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for needed in (
        "sagemaker_tfs/cli.py",
        "sagemaker_tfs/nginx/nginx.conf.template",
        "sagemaker_tfs/nginx/tensorflow_serving.js",
    ):
        assert needed in names, f"{needed} missing from the wheel"
    assert any(re.match(r"sagemaker_tfs/wire/protos/.*\.pb$", name) for name in names)
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert re.search(r"^serve\s*=", zipfile.ZipFile(wheel).read(entry_points).decode(), re.M)


IMPORT_WITHOUT_TENSORFLOW = """
import importlib, pkgutil, sys
import sagemaker_tfs

class NotInTheImage:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("tensorflow", "tensorflow_serving"):
            raise ImportError(f"{name} is not importable in the image")

sys.meta_path.insert(0, NotInTheImage())
for module in pkgutil.walk_packages(sagemaker_tfs.__path__, "sagemaker_tfs."):
    if not module.name.startswith("sagemaker_tfs.model_server"):
        importlib.import_module(module.name)
entry = importlib.import_module("sagemaker_tfs.cli")
assert callable(entry.serve), "serve entry point"
"""


def test_everything_the_image_runs_imports_without_tensorflow() -> None:
    """The image has neither TensorFlow nor tensorflow-serving-api, so neither may be
    imported by anything but model_server/."""
    result = subprocess.run(
        [sys.executable, "-c", IMPORT_WITHOUT_TENSORFLOW],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr


def load_generator():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "generate_dockerfiles", DOCKER_DIR / "generate.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("2.21.0 12.5.1\n", "expected 'FULL CUDA CUDNN'"),
        ("2.21 12.5.1 9.3.0.75\n", "expected 'FULL CUDA CUDNN'"),
        ("2.21.0 12.5.1 9.3.0.75\n2.21.1 12.5.1 9.3.0.75\n", "one line per minor release"),
        ("# only comments\n", "no versions"),
    ],
)
def test_generator_rejects_a_malformed_version_list(tmp_path: Path, text: str, message: str):
    generator = load_generator()
    path = tmp_path / "versions.txt"
    path.write_text(text)
    with pytest.raises(generator.VersionsFileError, match=message):
        generator.read_releases(path)


def test_generator_check_reports_a_hand_edited_dockerfile(tmp_path: Path) -> None:
    """--check compares against the template: copy docker/ aside, edit one file, check."""
    copy = tmp_path / "docker"
    shutil.copytree(DOCKER_DIR, copy)
    edited = copy / short(known_versions()[0]) / "Dockerfile.cpu"
    edited.write_text(edited.read_text().replace("EXPOSE 8080", "EXPOSE 8081"))
    result = subprocess.run(
        [sys.executable, str(copy / "generate.py"), "--check"], capture_output=True, text=True
    )
    assert result.returncode == 1
    assert f"out of date: {edited}" in result.stderr
