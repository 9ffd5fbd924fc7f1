"""The README against the code: its variable table names every variable the package reads
(and no other), its ``inference.py`` excerpts are the example files verbatim, every example
is served by a test, the links of the README and docs/ lead somewhere, and it stays short."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from doc_commands import REPO_ROOT, doc_blocks
from sagemaker_tfs import stack_config

README = REPO_ROOT / "README.md"
EXAMPLES = REPO_ROOT / "examples" / "inference"
EXAMPLES_TEST = REPO_ROOT / "test" / "integration" / "stack" / "test_inference_examples.py"
PACKAGE = REPO_ROOT / "container" / "sagemaker_tfs"
VARIABLE = re.compile(r"SAGEMAKER_[A-Z0-9_]+|OMP_NUM_THREADS")
# Set by the supervisor for its own children, not by users.
INTERNAL_VARIABLES = {stack_config.STACK_CONFIG_ENV}
MAX_README_LINES = 300


def variables_read_by_the_package() -> set[str]:
    """Every string constant of the package that is a variable name (config.py reads them
    all but the model server's and the transform driver's log level)."""
    names = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            is_text = isinstance(node, ast.Constant) and isinstance(node.value, str)
            if is_text and VARIABLE.fullmatch(node.value):
                names.add(node.value)
    return names - INTERNAL_VARIABLES


def section(text: str, title: str) -> str:
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def expand(cell: str) -> list[str]:
    """``SAGEMAKER_TFS_IMAGE_SCALE`, `_OFFSET`` -> both full names: a name starting with ``_``
    replaces the previous name's words from the last one equal to its first word
    (``_METRICS_PATH`` after ``SAGEMAKER_TFS_METRICS``), else as many trailing words as it has."""
    names: list[str] = []
    for name in re.findall(r"`(_?[A-Z][A-Z0-9_]*)`", cell):
        if name.startswith("_") and names:
            words, previous = name[1:].split("_"), names[-1].split("_")
            if words[0] in previous:
                keep = len(previous) - 1 - previous[::-1].index(words[0])
            else:
                keep = len(previous) - len(words)
            name = "_".join(previous[:keep] + words)
        names.append(name)
    return names


def variables_in_readme_table() -> list[str]:
    rows = [line for line in section(README.read_text(), "Variables").splitlines()]
    cells = [row.split("|")[1] for row in rows if row.startswith("| `")]
    return [name for cell in cells for name in expand(cell)]


def test_the_variable_table_names_every_variable_the_package_reads() -> None:
    in_table = variables_in_readme_table()
    read = variables_read_by_the_package()
    assert len(in_table) == len(set(in_table)), "a variable is listed twice"
    assert sorted(read - set(in_table)) == [], "read by the package, missing from README.md"
    assert sorted(set(in_table) - read) == [], "in README.md's table, read by nothing"


def test_expand_shorthand_names() -> None:
    cell = " `SAGEMAKER_TFS_INTER_OP_PARALLELISM`, `_INTRA_OP_PARALLELISM` "
    assert expand(cell) == [
        "SAGEMAKER_TFS_INTER_OP_PARALLELISM",
        "SAGEMAKER_TFS_INTRA_OP_PARALLELISM",
    ]
    assert expand("`SAGEMAKER_MULTI_MODEL_UNIVERSAL_BUCKET`, `_PREFIX`")[1].endswith("AL_PREFIX")
    metrics = expand("`SAGEMAKER_TFS_METRICS`, `_METRICS_PATH`")
    assert metrics == ["SAGEMAKER_TFS_METRICS", "SAGEMAKER_TFS_METRICS_PATH"]


def excerpts() -> list[tuple[str, str]]:
    """(example file, code) of each README Python block that starts with the file's path."""
    found = []
    for block in doc_blocks(README):
        first, _, code = block.text.partition("\n")
        if block.language == "python" and first.startswith("# examples/"):
            found.append((first[2:].strip(), code))
    return found


def test_readme_shows_the_examples_verbatim() -> None:
    shown = excerpts()
    assert len(shown) >= 2
    for name, code in shown:
        source = (REPO_ROOT / name).read_text()
        assert code.strip("\n") in source, f"README.md's excerpt of {name} is not in the file"


def example_names() -> list[str]:
    return sorted(p.parent.parent.name for p in EXAMPLES.glob("*/code/inference.py"))


def test_every_example_is_in_the_readme_and_served_by_a_test() -> None:
    names = example_names()
    assert {"json", "csv", "images", "handler", "grpc"} <= set(names)
    readme = README.read_text()
    served = set(re.findall(r'served_by\(tmp_path, "(\w+)"', EXAMPLES_TEST.read_text()))
    for name in names:
        assert f"(examples/inference/{name}/code/inference.py)" in readme, name
        assert name in served, f"{name} is not served by {EXAMPLES_TEST.name}"


def test_readme_stays_short() -> None:
    assert len(README.read_text().splitlines()) <= MAX_README_LINES


def anchor(title: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", title.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"^\s*```.*?^\s*```", "", path.read_text(), flags=re.S | re.M)
    return {anchor(m) for m in re.findall(r"^#+ (.+)$", text, re.M)}


DOCS = [README, *sorted((REPO_ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_links_lead_to_files_and_headings_that_exist(doc: Path) -> None:
    text = re.sub(r"^\s*```.*?^\s*```", "", doc.read_text(), flags=re.S | re.M)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto
        file, _, fragment = target.partition("#")
        path = (doc.parent / file).resolve() if file else doc
        if not path.exists() or fragment and path.suffix == ".md" and fragment not in anchors(path):
            broken.append(target)
    assert broken == []


def test_anchor_follows_github() -> None:
    assert (
        anchor("SDK v3: `ModelBuilder`'s local container") == "sdk-v3-modelbuilders-local-container"
    )
    assert anchor("Binary payloads and gRPC without `inference.py`") == (
        "binary-payloads-and-grpc-without-inferencepy"
    )


def test_ci_runs_the_test_command_the_readme_gives() -> None:
    """.ci/run ends in the README's second first command, so what CI runs is what a newcomer
    is told to run."""
    first_steps = section(README.read_text(), "First steps")
    assert "./scripts/test.sh              # run every test and lint check" in first_steps
    ci = (REPO_ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1] == "exec scripts/test.sh"
