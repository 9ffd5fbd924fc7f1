"""Runs the image scripts with stand-in ``docker`` and ``aws`` commands first on PATH.

These stand-ins are the only mocks in the script tests: there is no Docker daemon and no AWS
account here. Each records its argv (and, for ``docker login``, what arrived on stdin) as one
JSON line, and prints what the real command would print for the calls the scripts make.

``docker`` answers ``docker version`` as Docker without a daemon does (a Client block, exit 1;
``STAND_IN_DAEMON=1``: a Server block too, exit 0), or as podman installed as ``docker`` does
with ``STAND_IN_ENGINE=podman``. ``docker container inspect`` finds the container unless
``STAND_IN_NO_CONTAINER=1``; with ``--format '{{.State.ExitCode}}'`` it prints
``STAND_IN_EXIT_CODE`` (default 0). ``STAND_IN_FAIL=PREFIX`` makes the calls starting with
PREFIX (e.g. ``docker login``) exit 255.

The scripts run from a copy of the repository's ``scripts/`` and ``docker/`` in a temporary
directory, so that ``build.sh --arch eia`` writes its EI binary there and ``--local`` reaches
a stand-in ``scripts/local.sh`` instead of starting the real stack.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
ACCOUNT = "123456789012"
REGION = "eu-west-1"
REGISTRY = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com"
EI_BINARY_CONTENT = b"#!/bin/sh\necho amazonei stand-in\n"

STAND_IN = """#!{python}
import json, os, sys, tarfile, io
name = os.path.basename(sys.argv[0])
args = sys.argv[1:]
record = {{"cmd": name, "args": args}}
if name == "docker" and args[:1] == ["login"]:
    record["stdin"] = sys.stdin.read()
if name == "docker" and args[:1] == ["build"]:
    artifact = os.path.join(os.getcwd(), "docker/build_artifacts/amazonei_tensorflow_model_server")
    record["cwd"] = os.getcwd()
    record["ei_binary_present"] = os.path.exists(artifact)
    record["ei_binary_executable"] = os.access(artifact, os.X_OK)
    if record["ei_binary_present"]:
        record["ei_binary"] = open(artifact, "rb").read().decode()
with open(os.environ["STAND_IN_LOG"], "a") as log:
    log.write(json.dumps(record) + "\\n")
fail = os.environ.get("STAND_IN_FAIL", "")
if fail and " ".join([name] + args).startswith(fail):
    sys.exit(255)
if name == "aws":
    if args[:2] == ["configure", "get"]:
        region = os.environ.get("STAND_IN_CONFIGURED_REGION")
        if not region:
            sys.exit(1)
        print(region)
    elif args[:2] == ["sts", "get-caller-identity"]:
        print({account!r})
    elif args[:2] == ["ecr", "get-login-password"]:
        print("stand-in-token")
    elif args[:2] == ["s3", "ls"]:
        listing = os.environ.get("STAND_IN_EI_ARCHIVE")
        if not listing:
            sys.exit(1)
        print("2020-08-05 10:00:00   12345678 " + listing)
    elif args[:2] == ["s3", "cp"]:
        content = {ei!r}
        with tarfile.open(args[3], "w:gz") as tar:
            info = tarfile.TarInfo("ei-build/bin/amazonei_tensorflow_model_server")
            info.size = len(content)
            info.mode = 0o755
            tar.addfile(info, io.BytesIO(content))
elif name == "docker" and args[:1] == ["run"]:
    print("0123456789abcdef")
elif name == "docker" and args[:1] == ["version"]:
    if os.environ.get("STAND_IN_ENGINE") == "podman":
        print("Client:       Podman Engine\\nVersion:      4.3.1\\nAPI Version:  4.3.1")
    else:
        print("Client: Docker Engine - Community\\n Version:           28.2.2\\n API version: 1.50")
        if not os.environ.get("STAND_IN_DAEMON"):
            print("Cannot connect to the Docker daemon at unix:///var/run/docker.sock."
                  " Is the docker daemon running?", file=sys.stderr)
            sys.exit(1)
        print("\\nServer: Docker Engine - Community\\n Engine:\\n  Version:          28.2.2")
elif name == "docker" and args[:2] == ["container", "inspect"]:
    if os.environ.get("STAND_IN_NO_CONTAINER") == "1":
        print("[]")
        print("Error: No such container: " + args[-1], file=sys.stderr)
        sys.exit(1)
    code = os.environ.get("STAND_IN_EXIT_CODE", "0")
    if "--format" in args:
        template = args[args.index("--format") + 1]
        if template != "{{{{.State.ExitCode}}}}":
            sys.exit("stand-in docker: unsupported --format " + template)
        print(code)
    else:
        print(json.dumps([{{"Name": args[-1], "State": {{"ExitCode": int(code)}}}}]))
elif name == "docker" and args[:1] in (["stop"], ["rm"]):
    print(args[-1])
elif name == "docker" and args[:1] == ["logs"]:
    print("serve: stand-in log line 1")
    print("serve: stand-in log line 2")
"""


@dataclass
class ScriptRun:
    returncode: int
    stdout: str
    stderr: str
    calls: list[dict]

    def commands(self) -> list[list[str]]:
        """Each stand-in call as ``[cmd, *args]``."""
        return [[call["cmd"], *call["args"]] for call in self.calls]


class ScriptRunner:
    """Runs ``scripts/NAME`` from the temporary copy with the stand-ins on PATH."""

    def __init__(self, root: Path, bin_dir: Path, log: Path) -> None:
        self.root = root
        self.bin_dir = bin_dir
        self.log = log

    def __call__(self, script: str, *args: str, env: dict[str, str] | None = None) -> ScriptRun:
        self.log.write_text("")
        environment = {
            "PATH": f"{self.bin_dir}:/usr/bin:/bin",
            "HOME": str(self.root),
            "STAND_IN_LOG": str(self.log),
            **(env or {}),
        }
        result = subprocess.run(
            [str(self.root / "scripts" / script), *args],
            env=environment,
            capture_output=True,
            text=True,
            timeout=60,
            cwd=self.root,
        )
        calls = [json.loads(line) for line in self.log.read_text().splitlines()]
        return ScriptRun(result.returncode, result.stdout, result.stderr, calls)


def copy_repository_parts(destination: Path) -> None:
    """The files the scripts read: scripts/, docker/ and the example model directory."""
    shutil.copytree(REPO_ROOT / "scripts", destination / "scripts")
    shutil.copytree(REPO_ROOT / "docker", destination / "docker")
    (destination / "test" / "resources" / "models" / "half_plus_three").mkdir(parents=True)
    local = destination / "scripts" / "local.sh"
    local.write_text('#!/bin/sh\nprintf "%s\\n" "$@" >> "$STAND_IN_LOG.local"\n')
    local.chmod(0o755)


def known_versions() -> list[str]:
    """Full versions from docker/versions.txt, newest first (read independently of the scripts)."""
    versions = []
    for line in (REPO_ROOT / "docker" / "versions.txt").read_text().splitlines():
        fields = line.split("#", 1)[0].split()
        if fields:
            versions.append(fields[0])
    return versions


def short(version: str) -> str:
    return ".".join(version.split(".")[:2])


def make_runner(tmp_path: Path) -> ScriptRunner:
    """A temporary repository copy with the stand-ins, ready to run scripts."""
    root = tmp_path / "repo"
    copy_repository_parts(root)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    text = STAND_IN.format(python=sys.executable, account=ACCOUNT, ei=EI_BINARY_CONTENT)
    for name in ("docker", "aws"):
        path = bin_dir / name
        path.write_text(text)
        path.chmod(0o755)
    return ScriptRunner(root, bin_dir, tmp_path / "calls.jsonl")


def glob_regex(glob: str) -> re.Pattern[str]:
    """A .dockerignore glob as a regex: ``**`` spans directories, ``*`` and ``?`` do not."""
    parts = re.split(r"(\*\*/?|\*|\?)", glob)
    translated = {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}
    return re.compile("".join(translated.get(part, re.escape(part)) for part in parts))


def dockerignore_includes(relative: str, patterns: list[str]) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parents decides."""
    parts = relative.split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    included = True
    for pattern in patterns:
        negated = pattern.startswith("!")
        regex = glob_regex(pattern.removeprefix("!").rstrip("/"))
        if any(regex.fullmatch(candidate) for candidate in candidates):
            included = negated
    return included


def dockerignore_patterns() -> list[str]:
    lines = (REPO_ROOT / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def build_context(destination: Path) -> Path:
    """Copies the files .dockerignore lets into the build context."""
    patterns = dockerignore_patterns()
    tracked = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for relative in tracked:
        source = REPO_ROOT / relative
        if source.is_file() and dockerignore_includes(relative, patterns):
            target = destination / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return destination


@dataclass(frozen=True)
class Instruction:
    keyword: str
    arguments: str


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction]

    def all(self, keyword: str) -> list[str]:
        return [i.arguments for i in self.instructions if i.keyword == keyword]


def parse_dockerfile(path: Path) -> list[Stage]:
    """Instructions grouped by stage; continuation lines joined, comments dropped."""
    logical: list[str] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    assert not pending, f"{path}: dangling line continuation"
    stages: list[Stage] = []
    for line in logical:
        keyword, _, arguments = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            match = re.fullmatch(r"(\S+)(?:\s+AS\s+(\S+))?", arguments.strip(), re.IGNORECASE)
            assert match, f"{path}: bad FROM {arguments!r}"
            stages.append(Stage(match.group(1), match.group(2), []))
        else:
            assert stages, f"{path}: {keyword} before FROM"
            stages[-1].instructions.append(Instruction(keyword, " ".join(arguments.split())))
    return stages
