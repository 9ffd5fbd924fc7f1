"""The package's size rules (docs/DESIGN.md "Package layout"): no module over 400 lines and no
function over 60, tables excepted (named below, each with why)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "container" / "sagemaker_tfs"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
MAX_FOLDER_MODULES = 15
# Functions that are tables: one entry a line, read as a list, not as logic.
TABLES = {
    "_flag_list": "tensorflow_model_server's flags, one FlagSpec each (model_server/flags.py)",
}


def package_modules() -> list[Path]:
    return sorted(path for path in PACKAGE.rglob("*.py") if "protos" not in path.parts)


def test_no_module_is_over_400_lines() -> None:
    long = {
        str(path.relative_to(PACKAGE)): lines
        for path in package_modules()
        if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def crowded_folders(root: Path = PACKAGE) -> dict[str, int]:
    """Folders with more than ``MAX_FOLDER_MODULES`` modules side by side (``__init__.py`` not
    counted): issue 56 split service/ (38) and supervisor/ (27) into subpackages."""
    counts = {
        str(folder.relative_to(root)): len([p for p in folder.glob("*.py") if p.stem != "__init__"])
        for folder in [root, *(p for p in root.rglob("*") if p.is_dir())]
    }
    return {folder: count for folder, count in counts.items() if count > MAX_FOLDER_MODULES}


def test_no_folder_holds_more_than_15_modules() -> None:
    assert crowded_folders() == {}


def test_the_folder_check_counts_modules(tmp_path: Path) -> None:
    for index in range(MAX_FOLDER_MODULES):
        (tmp_path / "fits").mkdir(exist_ok=True)
        (tmp_path / "fits" / f"m{index}.py").write_text("")
    (tmp_path / "fits" / "__init__.py").write_text("")
    assert crowded_folders(tmp_path) == {}
    (tmp_path / "fits" / "one_more.py").write_text("")
    assert crowded_folders(tmp_path) == {"fits": MAX_FOLDER_MODULES + 1}


def long_functions(path: Path, root: Path = PACKAGE) -> dict[str, int]:
    """The functions of ``path`` over the limit (tables excepted), with their lengths."""
    found = {}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno:
            lines = node.end_lineno - node.lineno + 1
            if lines > MAX_FUNCTION_LINES and node.name not in TABLES:
                found[f"{path.relative_to(root)}:{node.name}"] = lines
    return found


def test_no_function_is_over_60_lines() -> None:
    found: dict[str, int] = {}
    for path in package_modules():
        found.update(long_functions(path))
    assert found == {}


def test_the_size_check_counts_a_function_from_def_to_its_last_line(tmp_path: Path) -> None:
    def source(statements: int) -> str:
        return "def f():\n" + "".join(f"    x{i} = {i}\n" for i in range(statements))

    (tmp_path / "fits.py").write_text(source(MAX_FUNCTION_LINES - 1))
    (tmp_path / "long.py").write_text(source(MAX_FUNCTION_LINES))
    assert long_functions(tmp_path / "fits.py", tmp_path) == {}
    assert long_functions(tmp_path / "long.py", tmp_path) == {"long.py:f": MAX_FUNCTION_LINES + 1}
