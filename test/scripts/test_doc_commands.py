"""The commands in docs/performance.md and docs/reliability.md run as written: every script
they name exists and accepts the options given (its own ``--help`` says which), every pytest
target exists, and every variable set in front of a command is one the code or tests read.

Only fenced code blocks hold commands; a line ending in ``\\`` continues on the next.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCS = ("docs/performance.md", "docs/reliability.md")
# The benchmarks import TensorFlow (some at the top, for --help too).
pytestmark = pytest.mark.slow
SHELL_OPERATORS = {"|", "||", "&&", ";", ">", ">>", "2>&1", "&"}
ASSIGNMENT = re.compile(r"^([A-Z][A-Z0-9_]*)=")
OPTION = re.compile(r"(?<![\w-])(--[a-z0-9][a-z0-9-]*)")


@dataclass(frozen=True)
class Command:
    doc: str
    line: str
    words: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.doc}: {self.line}"


def fenced_lines(text: str) -> list[str]:
    """The lines of every fenced code block, continuation lines joined."""
    lines: list[str] = []
    inside = False
    pending = ""
    for raw in text.splitlines():
        if raw.lstrip().startswith("```"):
            inside = not inside
            continue
        if not inside:
            continue
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1] + " "
            continue
        lines.append(pending + raw)
        pending = ""
    return lines


def commands(doc: str) -> list[Command]:
    """Every shell line of ``doc``'s code blocks that runs a script or pytest."""
    found = []
    for line in fenced_lines((REPO_ROOT / doc).read_text()):
        try:
            words = tuple(shlex.split(line, comments=True))
        except ValueError:  # not shell (a log line with an apostrophe)
            continue
        if any(word.endswith(".py") or word == "pytest" for word in words):
            found.append(Command(doc, line.strip(), words))
    return found


ALL_COMMANDS = [command for doc in DOCS for command in commands(doc)]


def script_and_arguments(words: tuple[str, ...]) -> tuple[str, list[str]] | None:
    """``(script, its arguments)`` for ``[VAR=x ...] [python] SCRIPT.py ARGS``, else None
    (pytest's arguments are its targets)."""
    if "pytest" in words:
        return None
    for index, word in enumerate(words):
        if word.endswith(".py"):
            arguments = []
            for argument in words[index + 1 :]:
                if argument in SHELL_OPERATORS:
                    break
                arguments.append(argument)
            return word, arguments
    return None


@cache
def options_of(script: str) -> frozenset[str]:
    """The options ``script --help`` lists."""
    shown = subprocess.run(
        [sys.executable, script, "--help"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert shown.returncode == 0, f"{script} --help failed:\n{shown.stderr[-2000:]}"
    return frozenset(OPTION.findall(shown.stdout))


def documented_scripts(doc: str) -> set[str]:
    return {
        found[0]
        for command in ALL_COMMANDS
        if command.doc == doc and (found := script_and_arguments(command.words)) is not None
    }


def test_every_benchmark_and_the_start_up_timer_have_a_command() -> None:
    benchmarks = {
        str(path.relative_to(REPO_ROOT))
        for path in (REPO_ROOT / "test" / "perf").glob("*.py")
        if 'if __name__ == "__main__":' in path.read_text()
    }
    assert len(benchmarks) >= 12, benchmarks
    assert benchmarks <= documented_scripts("docs/performance.md")
    assert "test/reliability/model_server_startup.py" in documented_scripts("docs/reliability.md")
    assert any("pytest" in command.words for command in ALL_COMMANDS)


def test_every_script_exists_and_accepts_the_options_given() -> None:
    invocations = [
        (command, found)
        for command in ALL_COMMANDS
        if (found := script_and_arguments(command.words)) is not None
    ]
    scripts = sorted({script for _, (script, _) in invocations})
    for script in scripts:
        assert (REPO_ROOT / script).is_file(), f"{script} does not exist"
    with ThreadPoolExecutor(2) as pool:  # TensorFlow imports: two at a time on 2 cores
        accepted = dict(zip(scripts, pool.map(options_of, scripts), strict=True))
    for command, (script, arguments) in invocations:
        given = {argument.split("=", 1)[0] for argument in arguments if argument.startswith("--")}
        unknown = given - accepted[script]
        assert not unknown, f"{command}: {script} has no option {sorted(unknown)}"


def test_every_pytest_target_exists() -> None:
    for command in ALL_COMMANDS:
        if "pytest" not in command.words:
            continue
        targets = [word for word in command.words if word.startswith("test/")]
        assert targets, command
        for target in targets:
            path, _, node = target.partition("::")
            assert (REPO_ROOT / path).exists(), f"{command}: no {path}"
            name = node.split("[", 1)[0]
            if name:
                source = (REPO_ROOT / path).read_text()
                assert f"def {name}(" in source, f"{command}: no test {name} in {path}"


@cache
def source_text() -> str:
    roots = [REPO_ROOT / "container", REPO_ROOT / "test"]
    return "\n".join(path.read_text() for root in roots for path in sorted(root.rglob("*.py")))


def test_every_variable_set_in_front_of_a_command_is_read_somewhere() -> None:
    for command in ALL_COMMANDS:
        for word in command.words:
            match = ASSIGNMENT.match(word)
            if match is None:
                break  # the command itself: assignments come first
            name = match.group(1)
            if name in {"PYTHONPATH", "CI"}:
                continue
            assert is_read(name), f"{command}: nothing reads {name}"


def is_read(name: str) -> bool:
    """``name`` in the code or tests, whole or made up as ``f"PREFIX_{part}"`` with the rest,
    ``"SUFFIX"``, written as a string somewhere (``SAGEMAKER_TFS_RELIABILITY_{name}``)."""
    source = source_text()
    if name in source:
        return True
    cuts = [index + 1 for index, char in enumerate(name) if char == "_"]
    return any(f"{name[:cut]}{{" in source and f'"{name[cut:]}"' in source for cut in cuts)


def test_script_and_arguments_reads_a_command_line() -> None:
    words = tuple(shlex.split("X=1 .venv/bin/python test/perf/a.py --n 3 --m=4 | tee out # x"))
    assert script_and_arguments(words) == ("test/perf/a.py", ["--n", "3", "--m=4"])
    joined = fenced_lines("text\n```bash\npython a.py --x 1 \\\n    --y 2\n```\n")
    assert joined == ["python a.py --x 1      --y 2"]
