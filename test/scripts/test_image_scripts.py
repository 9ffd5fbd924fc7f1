"""The exact docker/aws commands build.sh, publish.sh, the -all loops, start.sh and stop.sh
issue, and their usage errors. docker and aws are stand-ins (no daemon, no AWS here).
build.sh first asks `docker version` which engine it is (Docker, or podman installed as
`docker`); that probe is part of the exact command lists below (VERSION_PROBE)."""

from __future__ import annotations

from pathlib import Path

import pytest
from script_helpers import (
    ACCOUNT,
    EI_BINARY_CONTENT,
    REGION,
    REGISTRY,
    ScriptRunner,
    known_versions,
    short,
)

NEWEST = known_versions()[0]
REPO = "sagemaker-tensorflow-serving"
VERSION_PROBE = ["docker", "version"]
PODMAN = {"STAND_IN_ENGINE": "podman"}
LOGIN = [
    [
        "aws",
        "sts",
        "get-caller-identity",
        "--region",
        REGION,
        "--query",
        "Account",
        "--output",
        "text",
    ],
    ["aws", "ecr", "get-login-password", "--region", REGION],
    ["docker", "login", "--username", "AWS", "--password-stdin", REGISTRY],
]


def file_and_tags(version: str, arch: str, repo: str, device: str) -> list[str]:
    return [
        "--file",
        f"docker/{short(version)}/Dockerfile.{arch}",
        "--tag",
        f"{repo}:{version}-{device}",
        "--tag",
        f"{repo}:{short(version)}-{device}",
        ".",
    ]


def build_command(version: str, arch: str, repo: str, device: str, cache: bool = True) -> list[str]:
    """`docker build` with Docker: the published image as cache, and inline cache written."""
    cache_args = ["--cache-from", f"{REGISTRY}/{repo}:{version}-{device}"] if cache else []
    return [
        "docker",
        "build",
        *cache_args,
        "--build-arg",
        "BUILDKIT_INLINE_CACHE=1",
        *file_and_tags(version, arch, repo, device),
    ]


def podman_build_command(version: str, arch: str, repo: str, *extra: str) -> list[str]:
    """`docker build` with podman: no registry cache, no inline cache argument."""
    return ["docker", "build", *extra, *file_and_tags(version, arch, repo, arch)]


def ca_bundle_behind_a_symlink(tmp_path: Path) -> tuple[Path, Path]:
    """(what the user passes, its real path): the scripts must mount the real file."""
    real = tmp_path / "proxy" / "certs" / "proxy-ca.crt"
    real.parent.mkdir(parents=True)
    real.write_text("-----BEGIN CERTIFICATE-----\nstand-in\n-----END CERTIFICATE-----\n")
    link = tmp_path / "ca-bundle.pem"
    link.symlink_to(real)
    return link, real.resolve()


def test_version_list_has_three_minor_releases_newest_first() -> None:
    versions = known_versions()
    assert len(versions) == 3
    assert len({short(v) for v in versions}) == 3
    as_tuples = [tuple(int(part) for part in v.split(".")) for v in versions]
    assert as_tuples == sorted(as_tuples, reverse=True)


@pytest.mark.parametrize("arch", ["cpu", "gpu"])
def test_build_logs_in_and_builds_with_cache_and_both_tags(run_script: ScriptRunner, arch: str):
    run = run_script("build.sh", "--arch", arch, "--region", REGION)
    assert run.returncode == 0, run.stderr
    assert run.commands() == [VERSION_PROBE, *LOGIN, build_command(NEWEST, arch, REPO, arch)]
    assert run.calls[3]["stdin"] == "stand-in-token\n"
    assert run.calls[4]["cwd"] == str(run_script.root)


@pytest.mark.parametrize("daemon", ["", "1"], ids=["daemon-down", "daemon-up"])
def test_build_treats_docker_as_docker_whether_or_not_its_daemon_answers(
    run_script: ScriptRunner, daemon: str
) -> None:
    run = run_script("build.sh", "--region", REGION, env={"STAND_IN_DAEMON": daemon})
    assert run.returncode == 0, run.stderr
    assert run.commands() == [VERSION_PROBE, *LOGIN, build_command(NEWEST, "cpu", REPO, "cpu")]
    assert "podman" not in run.stderr


@pytest.mark.parametrize("version", known_versions())
def test_build_accepts_short_and_full_versions(run_script: ScriptRunner, version: str) -> None:
    for given in (version, short(version)):
        run = run_script("build.sh", "--version", given, "--region", REGION, "--repository", "mine")
        assert run.returncode == 0, run.stderr
        assert run.commands()[-1] == build_command(version, "cpu", "mine", "cpu")


def test_build_region_from_environment_then_aws_configure(run_script: ScriptRunner) -> None:
    build = build_command(NEWEST, "cpu", REPO, "cpu")
    run = run_script("build.sh", env={"AWS_DEFAULT_REGION": REGION})
    assert run.returncode == 0, run.stderr
    assert run.commands() == [VERSION_PROBE, *LOGIN, build]
    run = run_script("build.sh", env={"STAND_IN_CONFIGURED_REGION": REGION})
    assert run.returncode == 0, run.stderr
    assert run.commands() == [VERSION_PROBE, ["aws", "configure", "get", "region"], *LOGIN, build]


def test_build_without_aws_account_builds_uncached(run_script: ScriptRunner) -> None:
    run = run_script("build.sh", "--region", REGION, env={"STAND_IN_FAIL": "aws sts"})
    assert run.returncode == 0, run.stderr
    assert "building without --cache-from" in run.stderr
    assert run.commands()[-1] == build_command(NEWEST, "cpu", REPO, "cpu", cache=False)
    assert not any(call[:2] == ["docker", "login"] for call in run.commands())


def test_build_with_failed_ecr_login_builds_uncached(run_script: ScriptRunner) -> None:
    run = run_script("build.sh", "--region", REGION, env={"STAND_IN_FAIL": "docker login"})
    assert run.returncode == 0, run.stderr
    assert "ECR login" in run.stderr
    assert run.commands()[-1] == build_command(NEWEST, "cpu", REPO, "cpu", cache=False)


def test_build_failure_is_the_script_failure(run_script: ScriptRunner) -> None:
    run = run_script("build.sh", "--region", REGION, env={"STAND_IN_FAIL": "docker build"})
    assert run.returncode != 0


def test_build_eia_fetches_ei_binary_into_context_and_removes_it(run_script: ScriptRunner):
    version = known_versions()[1]
    prefix = f"s3://amazonei-tensorflow/tensorflow-serving/v{short(version)}/ubuntu/latest/"
    run = run_script(
        "build.sh",
        *("--version", short(version), "--arch", "eia", "--region", REGION),
        env={"STAND_IN_EI_ARCHIVE": "ei-tfs.tar.gz"},
    )
    assert run.returncode == 0, run.stderr
    commands = run.commands()
    assert commands[:2] == [VERSION_PROBE, ["aws", "s3", "ls", prefix]]
    assert commands[2][:3] == ["aws", "s3", "cp"] and commands[2][3] == prefix + "ei-tfs.tar.gz"
    assert commands[3:] == [*LOGIN, build_command(version, "eia", f"{REPO}-eia", "cpu")]
    assert run.calls[6]["ei_binary_present"] and run.calls[6]["ei_binary_executable"]
    assert run.calls[6]["ei_binary"] == EI_BINARY_CONTENT.decode()
    artifact = run_script.root / "docker/build_artifacts/amazonei_tensorflow_model_server"
    assert not artifact.exists(), "the EI binary is left in the build context"


def test_build_eia_fails_clearly_when_the_version_has_no_ei_binary(run_script: ScriptRunner):
    run = run_script("build.sh", "--arch", "eia", "--region", REGION)
    assert run.returncode == 1
    assert f"no Elastic Inference model server for TF Serving {short(NEWEST)}" in run.stderr
    prefix = f"s3://amazonei-tensorflow/tensorflow-serving/v{short(NEWEST)}/ubuntu/latest/"
    assert run.commands() == [VERSION_PROBE, ["aws", "s3", "ls", prefix]]


@pytest.mark.parametrize("region_args", [[], ["--region", REGION]], ids=["no-region", "region"])
def test_build_with_podman_needs_no_aws_and_no_registry_cache(
    run_script: ScriptRunner, region_args: list[str]
) -> None:
    env = {**PODMAN, "STAND_IN_CONFIGURED_REGION": REGION}
    run = run_script("build.sh", "--arch", "gpu", *region_args, env=env)
    assert run.returncode == 0, run.stderr
    assert run.commands() == [VERSION_PROBE, podman_build_command(NEWEST, "gpu", REPO)]
    assert "warning: podman: building without --cache-from" in run.stderr


def test_build_with_podman_passes_the_real_ca_bundle_as_a_secret(run_script, tmp_path: Path):
    given, real = ca_bundle_behind_a_symlink(tmp_path)
    run = run_script("build.sh", "--ca-bundle", str(given), env=PODMAN)
    assert run.returncode == 0, run.stderr
    secret = ["--secret", f"id=pip-ca,src={real}"]
    assert run.commands() == [VERSION_PROBE, podman_build_command(NEWEST, "cpu", REPO, *secret)]


def test_build_with_docker_passes_the_ca_bundle_as_a_secret_too(run_script, tmp_path: Path):
    given, real = ca_bundle_behind_a_symlink(tmp_path)
    run = run_script("build.sh", "--region", REGION, "--ca-bundle", str(given))
    assert run.returncode == 0, run.stderr
    build = run.commands()[-1]
    assert build[build.index("--secret") + 1] == f"id=pip-ca,src={real}"
    assert build[:3] == ["docker", "build", "--cache-from"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--ca-bundle"], "--ca-bundle needs a value"),
        (["--ca-bundle", "/nope/ca.crt"], "no such CA bundle '/nope/ca.crt'"),
        (["--ca-bundle", "/etc"], "no such CA bundle '/etc'"),
    ],
)
@pytest.mark.parametrize("script", ["build.sh", "start.sh"])
def test_a_missing_ca_bundle_is_a_usage_error_before_any_command(
    run_script: ScriptRunner, script: str, args: list[str], message: str
) -> None:
    run = run_script(script, *args, env=PODMAN)
    assert run.returncode == 2
    assert message in run.stderr
    assert "usage: " in run.stderr
    assert run.calls == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--version", "1.15"], "unknown version '1.15'"),
        (["--version", "2.21.7"], "unknown version '2.21.7'"),
        (["--arch", "tpu"], "invalid arch 'tpu'"),
        (["--region"], "--region needs a value"),
        (["--frobnicate"], "unknown argument '--frobnicate'"),
        (["--repository", "Bad Name"], "invalid repository 'Bad Name'"),
    ],
)
@pytest.mark.parametrize("script", ["build.sh", "publish.sh", "start.sh", "stop.sh"])
def test_bad_arguments_are_usage_errors_before_any_command(
    run_script: ScriptRunner, script: str, args: list[str], message: str
) -> None:
    run = run_script(script, *args, env={"AWS_DEFAULT_REGION": REGION})
    assert run.returncode == 2
    assert message in run.stderr
    assert "usage: " in run.stderr
    assert run.calls == []


def test_publish_tags_and_pushes_full_then_short_then_logs_out(run_script: ScriptRunner):
    version = known_versions()[2]
    run = run_script("publish.sh", "--version", version, "--arch", "gpu", "--region", REGION)
    assert run.returncode == 0, run.stderr
    full, short_tag = f"{version}-gpu", f"{short(version)}-gpu"
    assert run.commands() == [
        *LOGIN,
        ["docker", "tag", f"{REPO}:{full}", f"{REGISTRY}/{REPO}:{full}"],
        ["docker", "tag", f"{REPO}:{full}", f"{REGISTRY}/{REPO}:{short_tag}"],
        ["docker", "push", f"{REGISTRY}/{REPO}:{full}"],
        ["docker", "push", f"{REGISTRY}/{REPO}:{short_tag}"],
        ["docker", "logout", REGISTRY],
    ]


def test_publish_eia_uses_eia_repository_and_cpu_tags(run_script: ScriptRunner) -> None:
    run = run_script("publish.sh", "--arch", "eia", "--region", REGION, "--repository", "tfs")
    assert run.returncode == 0, run.stderr
    pushes = [c[2] for c in run.commands() if c[:2] == ["docker", "push"]]
    assert pushes == [f"{REGISTRY}/tfs-eia:{NEWEST}-cpu", f"{REGISTRY}/tfs-eia:{short(NEWEST)}-cpu"]


def test_publish_stops_when_login_fails(run_script: ScriptRunner) -> None:
    run = run_script("publish.sh", "--region", REGION, env={"STAND_IN_FAIL": "docker login"})
    assert run.returncode != 0
    assert not any(call[:2] == ["docker", "push"] for call in run.commands())


def test_publish_needs_a_region(run_script: ScriptRunner) -> None:
    run = run_script("publish.sh")
    assert run.returncode == 2
    assert "no AWS region" in run.stderr


@pytest.mark.parametrize(
    ("script", "verb"), [("build-all.sh", "build"), ("publish-all.sh", "push")]
)
def test_all_scripts_loop_over_the_version_list(run_script: ScriptRunner, script: str, verb: str):
    run = run_script(script, "--region", REGION)
    assert run.returncode == 0, run.stderr
    if verb == "build":
        done = [c[c.index("--tag") + 1] for c in run.commands() if c[:2] == ["docker", "build"]]
    else:
        done = [c[2].split("/", 1)[1] for c in run.commands() if c[:2] == ["docker", "push"]]
        done = done[::2]  # full tags; the short tag follows each
    assert done == [f"{REPO}:{v}-{arch}" for v in known_versions() for arch in ("cpu", "gpu")]


def test_all_scripts_pass_bad_arguments_on_and_fail(run_script: ScriptRunner) -> None:
    run = run_script("build-all.sh", "--arch", "tpu")
    assert run.returncode == 2
    assert run.calls == []


def start_command(root: Path, *extra: str) -> list[str]:
    """start.sh's `docker run` with the defaults; ``extra`` follows the port range."""
    models = root / "test" / "resources" / "models"
    return [
        *("docker", "run", "--detach", "--name", f"sagemaker-tfs-{short(NEWEST)}-cpu"),
        *("--volume", f"{models}:/opt/ml/model:ro", "--publish", "8080:8080"),
        "--env=SAGEMAKER_SAFE_PORT_RANGE=9000-9999",
        *extra,
        *(f"{REPO}:{NEWEST}-cpu", "serve"),
    ]


def test_start_runs_the_image_with_models_port_and_sagemaker_env(run_script: ScriptRunner):
    env = {"SAGEMAKER_TFS_DEFAULT_MODEL_NAME": "half_plus_three", "SAGEMAKER_GUNICORN_WORKERS": "2"}
    run = run_script("start.sh", env={**env, "UNRELATED": "x"})
    assert run.returncode == 0, run.stderr
    assert run.commands() == [
        start_command(
            run_script.root,
            "--env=SAGEMAKER_GUNICORN_WORKERS",
            "--env=SAGEMAKER_TFS_DEFAULT_MODEL_NAME",
        )
    ]


def test_start_gpu_multi_model_custom_port(run_script: ScriptRunner) -> None:
    env = {"SAGEMAKER_MULTI_MODEL": "true", "SAGEMAKER_BIND_TO_PORT": "9090"}
    run = run_script("start.sh", "--arch", "gpu", "--port", "18080", env=env)
    assert run.returncode == 0, run.stderr
    command = run.commands()[0]
    assert command[command.index("--gpus") + 1] == "all"
    assert command[command.index("--volume") + 1].endswith(":/opt/ml/models:ro")
    assert command[command.index("--publish") + 1] == "18080:9090"
    assert "--env=SAGEMAKER_MULTI_MODEL" in command and "--env=SAGEMAKER_BIND_TO_PORT" in command


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--port", "http"], "invalid port"), (["--model-dir", "/nope"], "no such model directory")],
)
def test_start_rejects_bad_port_and_model_dir(run_script: ScriptRunner, args, message) -> None:
    run = run_script("start.sh", *args)
    assert run.returncode == 2 and message in run.stderr and run.calls == []


def test_start_mounts_the_real_ca_bundle_and_names_it_in_pip_cert(run_script, tmp_path: Path):
    given, real = ca_bundle_behind_a_symlink(tmp_path)
    run = run_script("start.sh", "--ca-bundle", str(given))
    assert run.returncode == 0, run.stderr
    ca_args = ["--volume", f"{real}:/etc/pip-ca-bundle.crt:ro"]
    ca_args += ["--env", "PIP_CERT=/etc/pip-ca-bundle.crt"]
    assert run.commands() == [start_command(run_script.root, *ca_args)]


@pytest.mark.parametrize(
    ("engine", "podman_only"), [({}, []), (PODMAN, ["--read-only-tmpfs=false"])]
)
def test_start_serverless_makes_the_root_read_only_but_tmp(
    run_script: ScriptRunner, engine: dict[str, str], podman_only: list[str]
) -> None:
    """Serverless Inference's constraints: only /tmp writable, a memory limit; podman's own
    writable /run and /var/tmp of a read-only container are turned off."""
    run = run_script("start.sh", "--serverless", "2g", env=engine)
    assert run.returncode == 0, run.stderr
    serverless = ["--read-only", "--tmpfs", "/tmp", "--memory", "2g", *podman_only]
    assert run.commands() == [VERSION_PROBE, start_command(run_script.root, *serverless)]


def test_start_cpus_gives_the_container_a_cpu_quota(run_script: ScriptRunner) -> None:
    """``--cpus N``: a CPU quota of N CPUs, as an inference component with N cores has."""
    run = run_script("start.sh", "--cpus", "1.5")
    assert run.returncode == 0, run.stderr
    assert run.commands() == [start_command(run_script.root, "--cpus", "1.5")]
    bad = run_script("start.sh", "--cpus", "all")
    assert bad.returncode == 2 and "invalid CPU count" in bad.stderr and bad.calls == []


def stop_commands(name: str, exit_code: int = 0) -> list[list[str]]:
    """What stop.sh runs for a container that exists and exits with exit_code when stopped."""
    logs = [["docker", "logs", "--tail", "20", name]] if exit_code else []
    return [
        ["docker", "container", "inspect", name],
        ["docker", "stop", "-t", "30", name],
        ["docker", "container", "inspect", "--format", "{{.State.ExitCode}}", name],
        *logs,
        ["docker", "rm", name],
    ]


def test_stop_stops_gracefully_then_removes_the_container_start_named(run_script: ScriptRunner):
    started = run_script("start.sh", "--arch", "eia")
    stopped = run_script("stop.sh", "--arch", "eia")
    name = started.commands()[0][started.commands()[0].index("--name") + 1]
    assert started.commands()[0][-2] == f"{REPO}-eia:{NEWEST}-cpu"
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.commands() == stop_commands(name)
    assert stopped.stdout == f"stopped {name} (exit code 0)\n"


def test_stop_shows_the_log_and_fails_when_the_container_exits_non_zero(run_script):
    run = run_script("stop.sh", env={"STAND_IN_EXIT_CODE": "137"})
    name = f"sagemaker-tfs-{short(NEWEST)}-cpu"
    assert run.returncode == 1
    assert run.commands() == stop_commands(name, exit_code=137)
    assert "serve: stand-in log line 1\nserve: stand-in log line 2\n" in run.stderr
    assert f"{name} exited with code 137" in run.stderr
    assert run.stdout == ""


def test_stop_without_the_container_fails_without_stopping_or_removing(run_script):
    run = run_script("stop.sh", env={"STAND_IN_NO_CONTAINER": "1"})
    name = f"sagemaker-tfs-{short(NEWEST)}-cpu"
    assert run.returncode == 1
    assert f"no container named {name}" in run.stderr
    assert run.commands() == [["docker", "container", "inspect", name]]


@pytest.mark.parametrize(("script", "verb"), [("start.sh", "start"), ("stop.sh", "stop")])
def test_local_delegates_to_local_sh(run_script: ScriptRunner, script: str, verb: str) -> None:
    run = run_script(script, "--model-dir", "my models", "--local", "--port", "18080")
    assert run.returncode == 0, run.stderr
    assert run.calls == []
    local_log = run_script.log.with_name(run_script.log.name + ".local")
    args = [verb, "--model-dir", "my models", "--port", "18080"]
    assert local_log.read_text().splitlines() == args


def test_account_in_registry_comes_from_sts(run_script: ScriptRunner) -> None:
    run = run_script("publish.sh", "--region", REGION)
    assert all(ACCOUNT in c[-1] for c in run.commands() if c[:2] == ["docker", "push"])


@pytest.mark.parametrize("script", ["build.sh", "publish.sh", "start.sh", "stop.sh", "curl.sh"])
def test_help_prints_usage_and_does_nothing(run_script: ScriptRunner, script: str) -> None:
    run = run_script(script, "--help")
    assert run.returncode == 0
    assert run.stdout.startswith(f"usage: {script} ")
    assert run.calls == []
