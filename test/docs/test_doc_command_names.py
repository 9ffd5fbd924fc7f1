"""Every shell command the docs give names what exists: the script and its options (its own
usage line), the ``sagemaker-tfs`` subcommand and options its parsers accept, the Python
script and options, the repository paths, the image versions, the routes a ``curl`` calls,
and the AWS CLI operations and parameters (botocore's service models, which the AWS CLI is
generated from). ``test/integration/stack/test_doc_commands_run.py`` runs the blocks that a
machine without AWS or a container engine can run.

Not checked beyond their repository paths and image tags: ``docker``/``podman`` options, and
the arguments of standard tools (``tar``, ``mkdir``, ``cp``, ...).
"""

from __future__ import annotations

import re
import shlex
from configparser import ConfigParser
from functools import cache

import botocore
import botocore.session
import pytest
import tomllib
from doc_commands import REPO_ROOT, doc_blocks, doc_paths, inline_commands, shell_blocks
from doc_commands import simple_commands as commands_of
from sagemaker_tfs import cli, config_rules
from sagemaker_tfs.model_server import flags
from sagemaker_tfs.supervisor import main as supervisor_main
from sagemaker_tfs.supervisor.model_servers.command_lines import MONITORING_PATH
from sagemaker_tfs.transform import job

STANDARD_TOOLS = {"tar", "mkdir", "cp", "cat", "printf", "grep", "xargs", "export", "ln", "rm",
                  "echo", "cd", "docker", "podman"}  # fmt: skip
REPO_DIRS = ("test/", "examples/", "docker/", "scripts/", "container/", "docs/")
IMAGE_TAG = re.compile(r"sagemaker-tensorflow-serving(?:-eia)?:(\d+\.\d+(?:\.\d+)?)-(?:cpu|gpu)")
AWS_GLOBAL_OPTIONS = {"--query", "--output", "--region", "--cli-binary-format", "--profile",
                      "--endpoint-url"}  # fmt: skip
AWS_CUSTOM_COMMANDS = {("s3", "cp"), ("s3", "ls"), ("s3", "sync"), ("s3", "mb"),
                       ("ecr", "get-login-password"), ("configure", "")}  # fmt: skip


def all_commands() -> list[tuple[str, list[str]]]:
    """(where, words) of every command in the docs: fenced blocks and inline spans."""
    found = [
        (block.where(), words) for block in shell_blocks() for words in commands_of(block.text)
    ]
    for path in doc_paths():
        for span in inline_commands(path):
            found += [(f"{path.name}: `{span}`", words) for words in commands_of(span)]
    return found


# --- what exists ---------------------------------------------------------------------------


def listed_versions() -> set[str]:
    versions = set()
    for line in (REPO_ROOT / "docker" / "versions.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            full = line.split()[0]
            versions |= {full, full.rsplit(".", 1)[0]}
    return versions


@cache
def usage_words(script: str) -> list[str]:
    """The words of a script's usage text (its USAGE string or its ``usage:`` line)."""
    text = (REPO_ROOT / "scripts" / script).read_text()
    found = re.search(r'^USAGE="(.*?)"$', text, re.S | re.M) or re.search(r"usage: (.*?)\"", text)
    assert found, f"scripts/{script} has no usage text"
    return found.group(1).replace("[", " ").replace("]", " ").replace("|", " | ").split()


def option_takes_value(script: str, option: str) -> bool:
    words = usage_words(script)
    index = words.index(option)
    following = words[index + 1] if index + 1 < len(words) else "--"
    return not following.startswith("--") and following not in ("|", "EXAMPLE...")


def tox_environments() -> set[str]:
    tox = ConfigParser()
    tox.read(REPO_ROOT / "tox.ini")
    names = {s.split(":", 1)[1] for s in tox.sections() if s.startswith("testenv:")}
    return names | {"py"}


def pytest_markers() -> set[str]:
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    return {m.split(":")[0] for m in pyproject["tool"]["pytest"]["ini_options"]["markers"]}


def nginx_locations() -> list[str]:
    """The public routes: the nginx templates' ``location`` patterns as regular expressions
    (but the catch-all ``/``, which answers 404, and the internal error pages)."""
    patterns = []
    for template in (REPO_ROOT / "container/sagemaker_tfs/nginx").glob("*.conf*"):
        text = template.read_text().replace("@@METRICS_PATH@@", config_rules.DEFAULT_METRICS_PATH)
        for kind, value in re.findall(r"location\s+(=|~)?\s*(\S+)\s*\{", text):
            if value == "/" or value.startswith(("/.error/", "@")):
                continue
            exact = re.escape(value) + "$"
            patterns.append(value if kind == "~" else exact if kind == "=" else re.escape(value))
    return patterns


# --- checks ---------------------------------------------------------------------------------


def repository_paths(words: list[str]) -> list[str]:
    """Problems: paths into the repository that do not exist, image tags of other versions."""
    problems = []
    for word in words:
        candidate = word.strip("[]").replace("$PWD/", "").split(":")[0]
        placeholder = re.search(r"[<>]|\bDIR\b|\bNAME\b", candidate)
        in_repository = candidate.startswith(REPO_DIRS) and not placeholder
        if in_repository and not (REPO_ROOT / candidate).exists():
            problems.append(f"no such path {candidate}")
        tag = IMAGE_TAG.search(word)
        if tag and tag.group(1) not in listed_versions():
            problems.append(f"image tag {tag.group(0)}: not in docker/versions.txt")
    return problems


def script_problems(script: str, args: list[str]) -> list[str]:
    path = REPO_ROOT / "scripts" / script
    if not path.is_file():
        return [f"no script scripts/{script}"]
    if script.endswith(".py"):
        return python_problems([f"scripts/{script}", *args])
    if not args:
        return []
    if script == "test.sh":  # its arguments are tox's, then pytest's after --
        tox_args, _, pytest_args = " ".join(args).partition("--")
        envs = re.findall(r"-e\s+(\S+)", tox_args)
        problems = [f"no tox environment {e}" for e in envs if e not in tox_environments()]
        return problems + repository_paths(pytest_args.split())
    usage = usage_words(script)
    also = usage_words("local.sh") if "--local" in args else []
    problems, index = [], 0
    while index < len(args):
        word = args[index].strip("[]")
        if word.startswith("-"):
            if word not in usage and word not in also:
                problems.append(f"scripts/{script} has no option {word}")
            elif word in usage and option_takes_value(script, word):
                index += 1
                value = args[index].strip("[]") if index < len(args) else ""
                if word == "--version" and value not in listed_versions():
                    problems.append(f"--version {value}: not in docker/versions.txt")
                if word == "--arch" and value not in ("cpu", "gpu", "eia"):
                    problems.append(f"--arch {value}: not cpu, gpu or eia")
        elif word not in usage:
            problems.append(f"scripts/{script}: {word!r} is not in its usage")
        index += 1
    return problems


def cli_problems(args: list[str]) -> list[str]:
    if not args or args[0] not in cli.COMMANDS:
        return [f"sagemaker-tfs has no command {args[:1]}"]
    command, rest = args[0], args[1:]
    if not rest:
        return []  # the command named in prose
    if command == "model-server":
        parsed = flags.parse_command_line(rest)
        unknown = [] if parsed.help_requested else parsed.leftovers
        return [f"model-server: {e}" for e in parsed.errors + unknown]
    try:
        if command == "serve":
            supervisor_main.parse_args(rest)
        else:
            job.parse_args(rest)
    except (SystemExit, job.JobConfigError) as error:
        return [f"sagemaker-tfs {command} refuses {shlex.join(rest)}: {error}"]
    return []


def python_problems(args: list[str]) -> list[str]:
    if args[:2] == ["-m", "pytest"]:
        markers = re.findall(r"-m\s+(?:not\s+)?(\w+)", " ".join(args[2:]))
        problems = [f"no pytest marker {m}" for m in markers if m not in pytest_markers()]
        paths = [a for a in args[2:] if a.startswith("test")]
        return problems + [f"no such path {p}" for p in paths if not (REPO_ROOT / p).exists()]
    script = REPO_ROOT / args[0]
    if not script.is_file():
        return [f"no such script {args[0]}"]
    source = script.read_text()
    options = [a.split("=")[0] for a in args[1:] if a.startswith("--")]
    return [f"{args[0]} has no option {o}" for o in options if f'"{o}"' not in source]


def curl_problems(args: list[str]) -> list[str]:
    urls = [a for a in args if re.match(r"(https?://)?localhost:\d+/", a)]
    if len(urls) != 1:
        return [f"curl: expected one localhost URL in {args}"]
    port, path = re.match(r"(?:https?://)?localhost:(\d+)(/\S*)", urls[0]).groups()
    if port == "8501":  # a model server's REST port
        known = path.startswith("/v1/models/") or path == MONITORING_PATH
    else:
        known = any(re.match(pattern, path) for pattern in nginx_locations())
    return [] if known else [f"curl: no route {path} on port {port}"]


@cache
def botocore_session() -> botocore.session.Session:
    return botocore.session.get_session()


def aws_problems(args: list[str]) -> list[str]:
    words = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in AWS_GLOBAL_OPTIONS:
            skip = True
        else:
            words.append(arg)
    service, command = words[0], words[1] if len(words) > 1 else ""
    if (service, command) in AWS_CUSTOM_COMMANDS:
        return []
    session = botocore_session()
    model = session.get_service_model(service)
    by_cli_name = {botocore.xform_name(name, "-"): name for name in model.operation_names}
    params = words[2:]
    if command == "wait":
        waiters = session.get_waiter_model(service)
        waiter = {botocore.xform_name(n, "-"): n for n in waiters.waiter_names}.get(params[0])
        if waiter is None:
            return [f"aws {service} wait: no waiter {params[0]}"]
        operation = waiters.get_waiter(waiter).operation
        params = params[1:]
    elif command in by_cli_name:
        operation = by_cli_name[command]
    else:
        return [f"aws {service}: no operation {command}"]
    members = {
        botocore.xform_name(m, "-") for m in model.operation_model(operation).input_shape.members
    }
    given = [p[2:] for p in params if p.startswith("--")]
    return [f"aws {service} {command}: no parameter --{p}" for p in given if p not in members]


def command_problems(words: list[str]) -> list[str]:
    program = re.sub(r"^(\./|\.venv/bin/)", "", words[0])
    args = words[1:]
    problems = repository_paths(words)
    if program.startswith("scripts/"):
        problems += script_problems(program.removeprefix("scripts/"), args)
    elif program == "sagemaker-tfs":
        problems += cli_problems(args)
    elif program in ("python", "python3"):
        problems += python_problems(args)
    elif program == "pytest":
        problems += python_problems(["-m", "pytest", *args])
    elif program == "curl":
        problems += curl_problems(args)
    elif program == "aws":
        problems += aws_problems(args)
    elif program not in STANDARD_TOOLS:
        problems.append(f"unknown program {words[0]}")
    return problems


COMMANDS = all_commands()


@pytest.mark.parametrize(("where", "words"), COMMANDS, ids=[w for w, _ in COMMANDS])
def test_command_names_what_exists(where: str, words: list[str]) -> None:
    assert command_problems(words) == [], f"{where}: {shlex.join(words)}"


def test_the_docs_have_commands_to_check() -> None:
    """The extraction itself works: the README's first commands and a docs block are found."""
    readme = [words for where, words in COMMANDS if where.startswith("README.md:")]
    assert ["./scripts/start.sh", "--local"] in readme and ["./scripts/test.sh"] in readme
    assert any(w[:2] == ["aws", "sagemaker"] for _, w in COMMANDS)


@pytest.mark.parametrize(
    ("words", "problem"),
    [
        (["./scripts/build.sh", "--versoin", "2.21"], "has no option --versoin"),
        (["./scripts/build.sh", "--version", "1.15"], "not in docker/versions.txt"),
        (["./scripts/curl.sh", "multimodel"], "not in its usage"),
        (["./scripts/test.sh", "-e", "pyy"], "no tox environment pyy"),
        ([".venv/bin/sagemaker-tfs", "serve", "--model_dir", "x"], "refuses"),
        (["sagemaker-tfs", "model-server", "--rest_port=8501"], "--rest_port=8501"),
        (["sagemaker-tfs", "transform", "--model-dir", "m", "--input", "i"], "refuses"),
        (["curl", "localhost:8080/invocation"], "no route /invocation"),
        (["aws", "sagemaker", "create-model", "--model", "x"], "no parameter --model"),
        (["aws", "sagemaker", "wait", "endpoint-ready"], "no waiter"),
        (["python", "docker/generate.py", "--chek"], "no option --chek"),
        (["cp", "-r", "examples/inference/jsn/code", "/tmp/x"], "no such path"),
        (["docker", "run", "sagemaker-tensorflow-serving:1.15.0-cpu"], "not in docker/versions"),
        (["kubectl", "apply"], "unknown program"),
    ],
)
def test_a_wrong_command_is_reported(words: list[str], problem: str) -> None:
    problems = command_problems(words)
    assert any(problem in p for p in problems), problems


def test_docker_for_sdk_shown_in_sdk_md_is_the_tested_file() -> None:
    """docs/sdk.md shows the `docker` stand-in that the SDK local-mode tests use."""
    shown = [b for b in doc_blocks(REPO_ROOT / "docs/sdk.md") if b.text.startswith("#!")]
    file = (REPO_ROOT / "test/image/stand_in/docker-for-sdk").read_text().splitlines()
    code = [line for line in file if not line.startswith("# ")]
    assert [b.text.splitlines() for b in shown] == [code]
