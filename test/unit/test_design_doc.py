"""docs/DESIGN.md names only what exists: every repository path in backticks, every module
file, each module of a package's table in that package's folder, and every ``module.name``
of the package (a function, class, constant or field defined in that module)."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGE = REPO_ROOT / "container" / "sagemaker_tfs"
DESIGN = REPO_ROOT / "docs" / "DESIGN.md"
# Where a relative path may start: the repository's top folders and the package's.
REPO_TOPS = ("container/", "test/", "scripts/", "docker/", "docs/", ".ci/")
PACKAGE_TOPS = ("supervisor/", "service/", "model_server/", "wire/", "transform/", "nginx/")
# Files that DESIGN.md names as they are written at run time (WORK_DIR), not repo files.
RUN_TIME_FILES = {"nginx.conf"}
GENERATED = {"test/.models-cache"}  # made by test/models/make_test_models.py, gitignored
SOURCE_SUFFIXES = (".py", ".js", ".sh", ".template", ".conf")
SPAN = re.compile(r"`([^`]+)`")
DOTTED = re.compile(r"^([a-z_][a-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)(?:\(.*\))?$")
PLACEHOLDER = re.compile(r"[A-Z]{2,}|[<>{}]|\.\.\.")
EXTENSIONS = {
    "py",
    "js",
    "sh",
    "conf",
    "config",
    "json",
    "lock",
    "txt",
    "in",
    "template",
    "pb",
    "sock",
    "pipe",
}


def prose(text: str) -> str:
    """The text without its fenced code blocks (their backticks are not spans)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.DOTALL | re.MULTILINE)


def spans(text: str) -> list[str]:
    """Every backticked span, a line break inside one read as a space."""
    return [" ".join(span.split()) for span in SPAN.findall(prose(text))]


def resolves(path: str) -> bool:
    """A repository path, or one relative to the package (``wire/x.py``) or to one of its
    folders (``nginx/x.conf``); ``*`` may stand for any name."""
    bases = [REPO_ROOT, PACKAGE, *[p for p in PACKAGE.iterdir() if p.is_dir()]]
    return any(any(base.glob(path.rstrip("/"))) for base in bases)


@cache
def source_files() -> dict[str, list[Path]]:
    files: dict[str, list[Path]] = {}
    for path in REPO_ROOT.glob("*.py"):  # setup.py
        files.setdefault(path.name, []).append(path)
    for top in ("container", "test", "scripts", "docker"):
        for path in (REPO_ROOT / top).rglob("*"):
            if path.is_file() and ".models-cache" not in path.parts:
                files.setdefault(path.name, []).append(path)
    return files


def is_repo_path(span: str) -> bool:
    return span.startswith(REPO_TOPS + PACKAGE_TOPS + ("protos/",))


def test_every_repository_path_exists() -> None:
    missing = [
        span
        for span in spans(DESIGN.read_text())
        if is_repo_path(span)
        and span not in GENERATED
        and not PLACEHOLDER.search(span)
        and not resolves(span)
    ]
    assert not missing, missing


def test_every_file_named_exists() -> None:
    named = {
        span
        for span in spans(DESIGN.read_text())
        if "/" not in span
        and " " not in span
        and span.endswith(SOURCE_SUFFIXES)
        and span not in RUN_TIME_FILES
    }
    assert len(named) > 50, named
    missing = [
        name
        for name in sorted(named)
        if not (source_files().get(name) or any(PACKAGE.rglob(name)))  # a glob: single_model_*
    ]
    assert not missing, missing


def tables_by_folder() -> dict[Path, set[str]]:
    """The names in the first cell of each package table, by the folder its heading names."""
    tables: dict[Path, set[str]] = {}
    folder: Path | None = None
    for line in DESIGN.read_text().splitlines():
        if line.startswith("#"):
            folders = [
                PACKAGE / span.rstrip("/")
                for span in SPAN.findall(line)
                if span.endswith("/") and (PACKAGE / span.rstrip("/")).is_dir()
            ]
            folder = folders[0] if folders else None
        elif folder is not None and line.startswith("| `"):
            tables.setdefault(folder, set()).update(SPAN.findall(line.split("|")[1]))
    return tables


def test_each_package_table_lists_modules_of_its_folder() -> None:
    tables = tables_by_folder()
    missing = [
        f"{folder.name}/{name}"
        for folder, names in tables.items()
        for name in sorted(names)
        if not (folder / name.rstrip("/")).exists()
    ]
    assert sum(len(names) for names in tables.values()) > 80, tables
    assert not missing, missing


def defines(module: Path, name: str) -> bool:
    """``name`` is a function, class, constant, field or attribute set in ``module``."""
    pattern = rf"^\s*(def|class) {name}\b|^\s*{name}\s*[:=]|self\.{name}\s*[:=]|^\s*{name},?$"
    return re.search(pattern, module.read_text(), re.MULTILINE) is not None


def test_every_module_name_pair_is_defined() -> None:
    modules: dict[str, list[Path]] = {}
    for path in PACKAGE.rglob("*.py"):
        modules.setdefault(path.stem, []).append(path)
    pairs = []
    for span in spans(DESIGN.read_text()):
        match = DOTTED.match(span)
        if (
            match
            and match.group(1) in modules
            and match.group(2) not in EXTENSIONS
            and not PLACEHOLDER.search(match.group(2))
        ):
            pairs.append((match.group(1), match.group(2)))
    assert len(pairs) > 20, pairs
    undefined = [
        f"{module}.{name}"
        for module, name in pairs
        if not any(defines(path, name) for path in modules[module])
    ]
    assert not undefined, undefined


def test_every_generated_test_model_is_listed() -> None:
    source = (REPO_ROOT / "test" / "models" / "make_test_models.py").read_text()
    table = source[source.index("\nMODELS: dict") :]
    names = re.findall(r'^\s+"(\w+)": make_', table, re.MULTILINE)
    assert len(names) >= 10, names
    listed = set(spans(DESIGN.read_text()))
    assert [name for name in names if name not in listed] == []


def test_every_module_of_a_process_folder_has_a_row() -> None:
    """The reverse of the check above: a module added without a row fails here."""
    tables = tables_by_folder()
    unlisted = []
    for folder in sorted(p for p in PACKAGE.rglob("*") if p.is_dir() and p in tables):
        for module in sorted(folder.glob("*.py")):
            if module.name != "__init__.py" and module.name not in tables[folder]:
                unlisted.append(str(module.relative_to(PACKAGE)))
    with_modules = {
        path.parent
        for path in PACKAGE.rglob("*.py")
        if path.stem != "__init__" and path.parent != PACKAGE and "protos" not in path.parts
    }
    assert sorted(str(folder.relative_to(PACKAGE)) for folder in with_modules - set(tables)) == []
    assert unlisted == []


def test_every_top_level_module_is_in_the_layout() -> None:
    text = DESIGN.read_text()
    layout = text[
        text.index("\nsagemaker_tfs/\n") : text.index("```", text.index("\nsagemaker_tfs/\n"))
    ]
    named = {line.split()[0] for line in layout.splitlines()[2:] if line.strip()}
    modules = {p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
    folders = {f"{p.name}/" for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert sorted((modules | folders) - named) == []


def _stack_configuration_section() -> str:
    text = DESIGN.read_text()
    start = text.index("## Stack configuration")
    return text[start : text.index("\n## ", start + 1)]


def _public_names(cls: type) -> list[str]:
    """A dataclass's fields, properties and methods (``to_json`` and the like included)."""
    import dataclasses

    fields = [field.name for field in dataclasses.fields(cls)]
    members = [
        name
        for name, value in vars(cls).items()
        if not name.startswith("_") and (isinstance(value, property) or callable(value))
    ]
    return fields + [name for name in members if name not in fields]


def test_every_stack_config_field_and_property_is_described() -> None:
    """The "Stack configuration" section names every field and property of ``StackConfig``,
    and every field, property and method of each tier's settings as ``tier.name`` (a field
    added without a word there fails here)."""
    import dataclasses
    import typing

    from sagemaker_tfs.stack_config import StackConfig

    spans = SPAN.findall(_stack_configuration_section())
    dotted = {
        word.rstrip(".") for span in spans for word in re.findall(r"[A-Za-z_][A-Za-z0-9_.]*", span)
    }
    dotted |= {word.removeprefix("config.") for word in dotted}
    words = {part for word in dotted for part in word.split(".")}
    hints = typing.get_type_hints(StackConfig)
    tiers = {
        field.name: hints[field.name]
        for field in dataclasses.fields(StackConfig)
        if dataclasses.is_dataclass(hints[field.name])
    }
    top = [
        name for name in _public_names(StackConfig) if name not in ("to_json", "from_dict", "load")
    ]
    nested = [f"{tier}.{name}" for tier, cls in tiers.items() for name in _public_names(cls)]
    assert len(tiers) >= 10
    assert [name for name in top if name not in words] == []
    assert [name for name in nested if name not in dotted] == []
