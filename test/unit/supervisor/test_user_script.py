"""user_script.may_serve_invocations: what nginx's routes are decided on, before the service
imports the script. A "no" sends /invocations past the user's code, so every way a script can
define a handler must read as "may"; only a script that surely has none reads "no"."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from sagemaker_tfs.user_script import may_serve_invocations

STREAM = "def stream_handler(messages, context):\n    yield from messages\n"

SERVES = {
    "handler": "def handler(data, context):\n    return data, 'x'\n",
    "async handler": "async def handler(data, context):\n    return data\n",
    "the pair": (
        "def input_handler(data, context):\n    return data\n"
        "def output_handler(response, context):\n    return response, 'x'\n"
    ),
    "a class": "class handler:\n    pass\n",
    "an assignment": "handler = make()\n",
    "an annotated one": "handler: object = make()\n",
    "a walrus": "if (handler := make()):\n    pass\n",
    "an import": "from helpers import handler\n",
    "an import as": "from helpers import serve as handler\n",
    "a module import as": "import helpers.serving as handler\n",
    "in a branch": "import os\nif os.environ.get('X'):\n    def handler(d, c):\n        return d\n",
    "in an else": "try:\n    import x\nexcept ImportError:\n    pass\nelse:\n    handler = x.h\n",
    "in an except": "try:\n    from a import handler\nexcept ImportError:\n    handler = None\n",
    "in a with": "with open('f') as handler:\n    pass\n",
    "a for target": "for handler in []:\n    pass\n",
    "a match capture": "match 1:\n    case handler:\n        pass\n",
    "a star import": "from helpers import *\n",
    "globals()": "globals()['handler'] = print\n",
    "setattr": "import sys\nsetattr(sys.modules[__name__], 'handler', print)\n",
    "a global statement": "def install():\n    global handler\n    handler = print\ninstall()\n",
    "exec": "exec('def handler(d, c): return d')\n",
    "locals()": "locals()['handler'] = print\n",
    "a function's __globals__": "(lambda: 0).__globals__['handler'] = print\n",
    "a module __getattr__": "def __getattr__(name):\n    return print\n",
    "a syntax error": "def handler(:\n",
    "a null byte": "handler = 1\x00\n",
}

NOT_SERVING = {
    "only stream_handler": STREAM,
    "stream_handler and helpers": STREAM + "import json\nLIMIT = 3\ndef helper(x):\n    return x\n",
    "only input_handler": STREAM + "def input_handler(data, context):\n    return data\n",
    "a handler inside a function": STREAM + "def make():\n    def handler(d, c):\n        pass\n",
    "a handler attribute of a class": STREAM + "class Tools:\n    handler = print\n",
    "a handler in a lambda's name only": STREAM + "make = lambda handler: handler\n",
    "a stream handler by import": "from streaming import stream_handler\n",
}


@pytest.mark.parametrize("source", SERVES.values(), ids=SERVES.keys())
def test_every_way_to_define_a_handler_reads_as_may_serve(tmp_path: Path, source: str) -> None:
    script = tmp_path / "inference.py"
    script.write_text(textwrap.dedent(source))
    assert may_serve_invocations(script)


@pytest.mark.parametrize("source", NOT_SERVING.values(), ids=NOT_SERVING.keys())
def test_a_script_with_no_invocation_handler_reads_as_not_serving(
    tmp_path: Path, source: str
) -> None:
    script = tmp_path / "inference.py"
    script.write_text(source)
    assert not may_serve_invocations(script)


def test_a_script_that_cannot_be_read_reads_as_may_serve(tmp_path: Path) -> None:
    assert may_serve_invocations(tmp_path / "missing.py")
    (tmp_path / "latin1.py").write_bytes(b"# -*- coding: utf-8 -*-\nx = '\xff'\n")
    assert may_serve_invocations(tmp_path / "latin1.py")


def test_a_script_nested_too_deep_to_parse_reads_as_may_serve(tmp_path: Path) -> None:
    """ast.parse raises RecursionError on it: the supervisor must not stop on that."""
    script = tmp_path / "inference.py"
    script.write_text(STREAM + "x = " + "+".join(["1"] * 100_000) + "\n")
    assert may_serve_invocations(script)


def test_a_deep_expression_that_parses_is_read_to_its_end(tmp_path: Path) -> None:
    """Deeper than Python's recursion limit but within the parser's: walked, not recursed."""
    script = tmp_path / "inference.py"
    script.write_text(STREAM + "x = " + "+".join(["1"] * 1_500) + "\n")
    assert not may_serve_invocations(script)
    script.write_text(STREAM + "handler = " + "+".join(["1"] * 1_500) + "\n")
    assert may_serve_invocations(script)
