"""Whether ``code/inference.py`` may serve ``/invocations``, read without running it.

The supervisor decides nginx's routes before the service imports the script: a script with
an ``/invocations`` handler sends every invocation through the Python service and is never
resent after a gunicorn worker's death (it may have run the user's code), while a script
with only ``stream_handler`` leaves ``/invocations`` as it is without a script (the njs, and
the resend: the service itself logs that it serves without it). Importing the script here
would run the user's code in the supervisor, so its syntax tree is read instead. The answer
errs toward "may": whatever could bind a name at run time that the tree does not show (a
star import, ``globals()``, ``setattr``, ``exec``, a module ``__getattr__``, a ``global``
statement in a function) counts as a handler, as does a script that cannot be read or
parsed (too deep a nesting included), since the service reports that one itself. Should a
script still bind its handlers some other way, the service, which imports it, finds the
handlers this reading missed and refuses to start with a message that says so
(``service/handlers/user_code.load_user_code``), rather than serve with nginx routing past it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

# The service serves /invocations with ``handler``, or ``input_handler`` with ``output_handler``
# (service/handlers/user_code.handlers_of).
HANDLER = "handler"
HANDLER_PAIR = ("input_handler", "output_handler")
# Names through which a module can bind a global the syntax tree does not show.
DYNAMIC_BINDERS = frozenset({"globals", "locals", "vars", "setattr", "exec", "eval", "__import__"})


def may_serve_invocations(path: str | Path) -> bool:
    """Whether the script at ``path`` may define an ``/invocations`` handler."""
    try:
        tree = ast.parse(Path(path).read_bytes(), str(path))
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return True  # the service reports a script it cannot import
    if _binds_dynamically(tree):
        return True
    names = set(_top_level_names(tree.body))
    return HANDLER in names or all(name in names for name in HANDLER_PAIR)


def _binds_dynamically(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in DYNAMIC_BINDERS:
            return True
        if isinstance(node, ast.Attribute) and node.attr in ("__dict__", "__globals__", "modules"):
            return True
        if isinstance(node, ast.Global):
            return True
        if isinstance(node, ast.ImportFrom) and any(alias.name == "*" for alias in node.names):
            return True
        if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
            return True
    return False


def _top_level_names(statements: list[ast.stmt]) -> Iterator[str]:
    """The names the module's own statements bind, in conditional and ``try`` blocks too,
    not inside functions or classes."""
    for statement in statements:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield statement.name
        elif isinstance(statement, (ast.Import, ast.ImportFrom)):
            for alias in statement.names:
                yield alias.asname or alias.name.split(".")[0]
        else:
            yield from _stored_names(statement)
            for block in ("body", "orelse", "finalbody"):
                yield from _top_level_names(getattr(statement, block, []))
            for handler in getattr(statement, "handlers", []):
                yield from _top_level_names(handler.body)
            for case in getattr(statement, "cases", []):
                yield from _top_level_names(case.body)


def _stored_names(statement: ast.stmt) -> Iterator[str]:
    """Names a statement binds (``=``, ``:=``, ``for``, ``with ... as``, ``case``), not those
    bound inside a function, class or lambda it holds (walked without recursion: an
    expression may nest deeper than Python's recursion limit)."""
    todo = list(ast.iter_child_nodes(statement))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            yield node.id
        if isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            yield node.name
        todo.extend(ast.iter_child_nodes(node))
