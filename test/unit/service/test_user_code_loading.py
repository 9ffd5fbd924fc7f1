"""Loading inference.py, code/lib and requirements.txt (no server needed)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from sagemaker_tfs.service.handlers import user_code as loading
from sagemaker_tfs.service.handlers.user_code import UserCodeError


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_no_script_means_no_user_code(tmp_path: Path) -> None:
    assert loading.load_user_code(None, str(tmp_path)) is None
    assert loading.load_user_code(str(tmp_path / "code"), str(tmp_path)) is None


def test_handler_wins_over_the_pair(tmp_path: Path) -> None:
    code = tmp_path / "code"
    write(
        code / "inference.py",
        "def handler(d, c): return 'h'\n"
        "def input_handler(d, c): return 'i'\n"
        "def output_handler(r, c): return 'o'\n",
    )
    user_code = loading.load_user_code(str(code), str(tmp_path))
    assert user_code is not None and user_code.handler is not None
    assert user_code.handler(None, None) == "h"
    assert user_code.input_handler is None


def test_the_pair(tmp_path: Path) -> None:
    code = tmp_path / "code"
    write(
        code / "inference.py",
        "def input_handler(d, c): return 1\ndef output_handler(r, c): return 2\n",
    )
    user_code = loading.load_user_code(str(code), str(tmp_path))
    assert user_code is not None and user_code.handler is None
    assert user_code.input_handler(None, None) == 1 and user_code.output_handler(None, None) == 2


def test_a_script_with_only_stream_handler(tmp_path: Path) -> None:
    """Single-model: the stream server takes it, /invocations serves as without a script."""
    code = tmp_path / "code"
    write(
        code / "inference.py", "def stream_handler(messages, context):\n    yield from messages\n"
    )
    assert loading.load_user_code(str(code), str(tmp_path)) is None
    every = loading.load_any_handlers(str(code), str(tmp_path))
    assert every is not None and not every.serves_requests
    assert every.stream_handler is not None
    assert list(every.stream_handler(iter(["a", b"b"]), None)) == ["a", b"b"]
    with pytest.raises(UserCodeError, match="must define handler"):
        loading.load_script(str(code / "inference.py"))  # multi-model: not a handler


def test_stream_handler_beside_a_handler(tmp_path: Path) -> None:
    code = tmp_path / "code"
    write(
        code / "inference.py", "def handler(d, c): return 1\ndef stream_handler(m, c): return m\n"
    )
    user_code = loading.load_user_code(str(code), str(tmp_path))
    assert user_code is not None and user_code.serves_requests
    assert user_code.handler is not None and user_code.stream_handler is not None


def test_a_handler_the_supervisors_reading_missed_stops_the_service(tmp_path: Path) -> None:
    """nginx routes /invocations by user_script's reading of the script; one that binds its
    handler where that reading cannot see (here through its own module object) must not be
    served with nginx sending the invocations past it."""
    code = tmp_path / "code"
    write(
        code / "inference.py",
        "import importlib\n"
        "def stream_handler(m, c): return m\n"
        "importlib.import_module(__name__).handler = lambda d, c: (d, 'x')\n",
    )
    with pytest.raises(UserCodeError, match="could not read without running it"):
        loading.load_user_code(str(code), str(tmp_path))


def test_no_handler_at_all_names_the_stream_form_too(tmp_path: Path) -> None:
    code = tmp_path / "code"
    write(code / "inference.py", "x = 1\n")
    with pytest.raises(UserCodeError, match=r"or stream_handler\(messages, context\)"):
        loading.load_user_code(str(code), str(tmp_path))


def test_half_a_pair_is_an_error(tmp_path: Path) -> None:
    code = tmp_path / "code"
    write(code / "inference.py", "def input_handler(d, c): return 1\n")
    with pytest.raises(UserCodeError, match="must define handler"):
        loading.load_user_code(str(code), str(tmp_path))


def test_import_errors_name_the_script(tmp_path: Path) -> None:
    code = tmp_path / "code"
    write(code / "inference.py", "import module_that_is_not_there\n")
    with pytest.raises(UserCodeError, match="inference.py failed: ModuleNotFoundError"):
        loading.load_user_code(str(code), str(tmp_path))


def test_code_lib_is_importable(tmp_path: Path) -> None:
    code = tmp_path / "code"
    write(code / "lib" / "unit_test_lib_module.py", "VALUE = 42\n")
    write(
        code / "inference.py",
        "import unit_test_lib_module\ndef handler(d, c): return unit_test_lib_module.VALUE\n",
    )
    try:
        user_code = loading.load_user_code(str(code), str(tmp_path))
        assert user_code is not None and user_code.handler(None, None) == 42
    finally:
        sys.path[:] = [p for p in sys.path if not p.startswith(str(tmp_path))]
        sys.modules.pop("unit_test_lib_module", None)


def test_two_scripts_do_not_clash(tmp_path: Path) -> None:
    first = write(tmp_path / "a" / "inference.py", "def handler(d, c): return 'a'\n")
    second = write(tmp_path / "b" / "inference.py", "def handler(d, c): return 'b'\n")
    assert loading.load_script(str(first)).handler(None, None) == "a"
    assert loading.load_script(str(second)).handler(None, None) == "b"


def test_requirements_skipped_when_lib_exists(tmp_path: Path) -> None:
    code = tmp_path / "code"
    write(code / "requirements.txt", "this-package-does-not-exist-anywhere==0\n")
    (code / "lib").mkdir()
    assert loading.install_requirements(str(code), str(tmp_path)) is False


def test_no_requirements_file(tmp_path: Path) -> None:
    assert loading.install_requirements(str(tmp_path), str(tmp_path)) is False
    assert loading.install_requirements(None, str(tmp_path)) is False


def test_failed_install_raises_with_pip_output(tmp_path: Path) -> None:
    code = tmp_path / "code"
    write(code / "requirements.txt", "./no-such-file.whl\n")
    with pytest.raises(UserCodeError, match="requirements.txt failed") as raised:
        loading.ensure_requirements(str(code), str(tmp_path / "work"))
    assert "no-such-file.whl" in str(raised.value)
    assert not (tmp_path / "work" / "user_packages.done").exists()
