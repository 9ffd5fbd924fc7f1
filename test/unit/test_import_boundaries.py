"""Which parts of sagemaker_tfs may import which: one place for the package's import rules.

The package is laid out by the process that runs it (supervisor/, service/, model_server/)
plus wire/ and client.py, shared by them. The rules on package imports are read from the
source (every ``import`` statement, lazy ones included); the rules on third-party libraries
are checked by importing in a fresh interpreter and looking at ``sys.modules``.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE_ROOT = Path(__file__).resolve().parents[2] / "container" / "sagemaker_tfs"
TENSORFLOW = ("tensorflow", "tensorflow_serving", "keras")


def imported_modules(path: Path, root: Path = PACKAGE_ROOT) -> set[str]:
    """The absolute module names a source file imports (relative imports resolved; ``root``:
    the folder of the package ``sagemaker_tfs``)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = ".".join(("sagemaker_tfs", *path.relative_to(root).parent.parts))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def forbidden_imports(part: str, forbidden: tuple[str, ...]) -> dict[str, list[str]]:
    """Modules of ``sagemaker_tfs.<part>`` (a folder or a module) importing a forbidden part."""
    root = PACKAGE_ROOT / part
    files = sorted(root.rglob("*.py")) if root.is_dir() else [root.with_suffix(".py")]
    prefixes = tuple(f"sagemaker_tfs.{name}" for name in forbidden)
    found = {}
    for path in files:
        bad = sorted(
            name
            for name in imported_modules(path)
            if any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes)
        )
        if bad:
            found[str(path.relative_to(PACKAGE_ROOT))] = bad
    return found


@pytest.mark.parametrize(
    ("part", "forbidden"),
    [
        ("supervisor", ("service", "model_server", "transform")),
        ("service", ("supervisor", "model_server", "transform")),
        ("model_server", ("service", "supervisor", "transform")),
        ("transform", ("service", "supervisor", "model_server")),
        ("wire", ("service", "supervisor", "model_server", "transform", "client")),
        ("client", ("service", "supervisor", "model_server", "transform")),
        ("container_limits", ("service", "supervisor", "model_server", "transform", "client")),
        ("ports", ("service", "supervisor", "model_server", "transform", "client")),
    ],
)
def test_package_boundaries(part: str, forbidden: tuple[str, ...]) -> None:
    assert forbidden_imports(part, forbidden) == {}


def test_the_import_reader_sees_what_a_module_imports() -> None:
    source = PACKAGE_ROOT / "service" / "routing" / "fast_path.py"
    assert "sagemaker_tfs.client" in imported_modules(source)
    assert "sagemaker_tfs.wire.errors.HttpError" in imported_modules(source)


def loaded_after_import(modules: list[str], roots: tuple[str, ...]) -> list[str]:
    """The modules under ``roots`` that importing ``modules`` loads, in a fresh interpreter."""
    code = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {roots!r})))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_client_loads_neither_pillow_nor_orjson_nor_tensorflow() -> None:
    """Users import the client in their ``inference.py``: it costs them gRPC and NumPy only."""
    assert loaded_after_import(["sagemaker_tfs.client"], ("PIL", "orjson", *TENSORFLOW)) == []


def test_the_service_does_not_load_tensorflow() -> None:
    """The service runs in the image's slim venv, which has no TensorFlow."""
    service = sorted(
        ".".join(("sagemaker_tfs", *path.relative_to(PACKAGE_ROOT).with_suffix("").parts))
        for path in service_modules(PACKAGE_ROOT / "service").values()
    )
    assert len(service) > 30
    assert loaded_after_import(service, TENSORFLOW) == []


def test_a_service_worker_starts_without_ml_dtypes() -> None:
    """Importing ml_dtypes took 0.5-1 s of every gunicorn worker's start (issue 55: a killed
    gunicorn master's successor serves only once its worker has imported the service); it
    is imported when a bfloat16 tensor is first met (``wire/tensors.py``)."""
    worker = ["sagemaker_tfs.service.edge.app", "sagemaker_tfs.service.stream.stream_server"]
    assert loaded_after_import(worker, ("ml_dtypes",)) == []


# The service's JSON / JSON lines / CSV reading (issue 53): one module family, one entry point
# (in codecs/), its internals in codecs/text/.
TEXT_PACKAGE = "codecs"
TEXT_ENTRY = "text_codecs"
TEXT_INTERNALS = "text"
TEXT_FAMILY = frozenset(
    {TEXT_ENTRY, "text_rest", "text_tensors", "text_json", "text_numbers", "text_csv",
     "text_refusals", "text_ragged", "text_mixed", "text_layout", "text_scan", "text_verbatim",
     "text_lines", "text_request_rules"}
)  # fmt: skip
TEXT_LIBRARIES = frozenset({"json", "orjson", "csv", "simplejson", "ujson", "rapidjson"})
# The service's other modules that import a JSON library, and why none of them reads an
# invocation's body with it.
JSON_NOT_FOR_BODIES = {
    "app": "the answer to a session's opening written",
    "invoke": "a handler's result written as JSON; the model server's error answer checked",
    "multi_model": "the supervisor's list of loaded models (the control API's answer) read",
    "registry": "the fast path's answers written as JSON, not a request read",
    "sessions": "a stateful session's control body (NEW_SESSION / CLOSE), not a model input",
    "stream_server": "the stream handshake's refusals written",
}


def service_modules(service: Path) -> dict[str, Path]:
    """The service's modules by name, in whichever of its subpackages they are (the names are
    unique across them)."""
    paths = [path for path in service.rglob("*.py") if path.stem != "__init__"]
    modules = {path.stem: path for path in paths}
    assert len(modules) == len(paths), "two modules of the service share a name"
    return modules


def text_reading_outside_the_family(service: Path) -> dict[str, list[str]]:
    """Modules of ``service`` outside the text family that import one of its internals (not
    its entry point) or a JSON/CSV library without a reason in ``JSON_NOT_FOR_BODIES``."""
    internals = tuple(
        f"sagemaker_tfs.service.{TEXT_PACKAGE}.{TEXT_INTERNALS}.{name}"
        for name in TEXT_FAMILY - {TEXT_ENTRY}
    )
    found = {}
    for _, path in sorted(service_modules(service).items()):
        if path.stem in TEXT_FAMILY:
            continue
        imported = imported_modules(path, service.parent)
        bad = [name for name in imported if name.startswith(internals)]
        if path.stem not in JSON_NOT_FOR_BODIES:
            bad += [name for name in imported if name.split(".")[0] in TEXT_LIBRARIES]
        if bad:
            found[path.stem] = sorted(bad)
    return found


def test_only_the_text_family_reads_json_and_csv_bodies() -> None:
    """Every route (``text_predict``/``invoke`` for the JSON answer, the registry's text codecs
    for a binary Accept) calls ``text_codecs.read_body``: no other module of the service parses
    or converts a JSON, JSON lines or CSV body, nor reaches past the entry point into the
    family."""
    assert text_reading_outside_the_family(PACKAGE_ROOT / "service") == {}
    modules = service_modules(PACKAGE_ROOT / "service")
    for route in ("registry", "text_predict"):
        entry = f"sagemaker_tfs.service.{TEXT_PACKAGE}.{TEXT_ENTRY}"
        assert entry in imported_modules(modules[route])
    assert "conversion" not in modules


def test_the_reasons_for_json_outside_the_family_still_hold() -> None:
    """Each module let import a JSON library still does (the list does not go stale), and the
    family is where the service's modules are."""
    modules = service_modules(PACKAGE_ROOT / "service")
    for module in JSON_NOT_FOR_BODIES:
        imported = imported_modules(modules[module])
        assert any(name.split(".")[0] in TEXT_LIBRARIES for name in imported), module
    codecs = PACKAGE_ROOT / "service" / TEXT_PACKAGE
    assert (codecs / f"{TEXT_ENTRY}.py").exists()
    internals = TEXT_FAMILY - {TEXT_ENTRY}
    assert all((codecs / TEXT_INTERNALS / f"{module}.py").exists() for module in internals)


@pytest.mark.parametrize(
    ("module", "line"),
    [
        ("fast_path", "import json"),
        ("targets", "import orjson"),
        ("numpy_codecs", "from sagemaker_tfs.service.codecs.text import text_rest"),
        ("invoke", "from sagemaker_tfs.service.codecs.text.text_tensors import read_csv_request"),
    ],
)
def test_the_family_check_sees_a_reader_outside_it(tmp_path: Path, module: str, line: str) -> None:
    """The check above fails on a copy of the service where one module imports a JSON library
    or one of the family's internals."""
    service = tmp_path / "sagemaker_tfs" / "service"
    shutil.copytree(PACKAGE_ROOT / "service", service, ignore=shutil.ignore_patterns("__pycache__"))
    target = service_modules(service)[module]
    target.write_text(target.read_text() + f"\n{line}\n")
    assert module in text_reading_outside_the_family(service)


def package_import_graph() -> dict[str, set[str]]:
    """Each module of the package -> the package's modules it imports (lazy imports and
    those under ``TYPE_CHECKING`` included: a cycle of either is still a knot to read)."""
    modules = {}
    for path in PACKAGE_ROOT.rglob("*.py"):
        parts = path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {}
    for name, path in modules.items():
        found = set()
        for imported in imported_modules(path):
            pieces = imported.split(".")
            owners = (".".join(pieces[:end]) for end in range(len(pieces), 0, -1))
            owner = next((candidate for candidate in owners if candidate in modules), None)
            if owner is not None and owner != name:
                found.add(owner)
        graph[name] = found
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The graph's strongly connected parts of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for imported in graph[module]:
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            part = stack[stack.index(module) :]
            del stack[stack.index(module) :]
            if len(part) > 1:
                cycles.append(sorted(part))

    for module in graph:
        if module not in index:
            visit(module)
    return cycles


def test_no_import_cycles() -> None:
    """Issue 56: the supervisor's launcher and its back ends imported each other (through
    ``TYPE_CHECKING``), and the health monitor borrowed helpers from one of them."""
    assert import_cycles(package_import_graph()) == []


def test_the_cycle_check_sees_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert import_cycles(graph) == [["a", "b", "c"]]


# The layers inside the service and the supervisor, lowest first: a module imports modules of
# its own layer or lower ones. "" stands for the modules at the folder's top (the service's
# shared vocabulary of a request; the supervisor's tiers and its main loop).
LAYERS = {
    "service": (("codecs",), ("",), ("routing",), ("handlers",), ("edge", "stream")),
    "supervisor": (("processes",), ("metrics",), ("multi_model",), ("model_servers",), ("",)),
}


def layer_of(module: str, part: str) -> int | None:
    """The rank of ``module`` (dotted) among ``part``'s layers; None outside ``part``."""
    pieces = module.split(".")
    if pieces[:2] != ["sagemaker_tfs", part] or len(pieces) < 3:
        return None
    folder = pieces[2] if (PACKAGE_ROOT / part / pieces[2]).is_dir() else ""
    return next(rank for rank, names in enumerate(LAYERS[part]) if folder in names)


def upward_imports(graph: dict[str, set[str]], part: str) -> list[str]:
    found = []
    for module, imported in sorted(graph.items()):
        rank = layer_of(module, part)
        for name in sorted(imported):
            other = layer_of(name, part)
            if rank is not None and other is not None and other > rank:
                found.append(f"{module} -> {name}")
    return found


@pytest.mark.parametrize("part", sorted(LAYERS))
def test_no_import_from_a_lower_layer_to_a_higher_one(part: str) -> None:
    folders = {path.name for path in (PACKAGE_ROOT / part).iterdir() if path.is_dir()}
    assert folders - {"__pycache__"} == {name for layer in LAYERS[part] for name in layer} - {""}
    assert upward_imports(package_import_graph(), part) == []


def test_the_layer_check_sees_an_upward_import() -> None:
    graph = {
        "sagemaker_tfs.service.codecs.registry": {"sagemaker_tfs.service.edge.app"},
        "sagemaker_tfs.service.edge.app": {"sagemaker_tfs.service.codecs.registry"},
    }
    assert upward_imports(graph, "service") == [
        "sagemaker_tfs.service.codecs.registry -> sagemaker_tfs.service.edge.app"
    ]
