"""Multi-model endpoints: each model's code in a namespace of its own, in one interpreter.

Every model's ``inference.py``, the modules beside it in ``code/`` and the packages in
``code/lib`` are imported under a prefix of their own (``sagemaker_tfs_user_<digest>.utils``),
never under their plain names: two models that each ship a ``utils.py``, or two versions of
one library in ``code/lib``, each get their own, whatever the order they were loaded in.

How: the modules of a namespace get a ``__builtins__`` of their own whose ``__import__``
resolves a plain ``import utils`` (or ``from mylib.sub import x``) to the namespace's module
when ``code/lib`` or ``code/`` has that name, and to the usual import otherwise (the standard
library, the service's packages, the requirements installed at start-up). A finder on
``sys.meta_path`` gives every module loaded under the prefix the same builtins, so a package
in ``code/lib`` that imports itself by its plain name stays inside the namespace too.
``unload`` drops the namespace's modules from ``sys.modules``.

Limits: code that names a module as a string (``importlib.import_module("utils")``,
``pickle`` of a class defined in ``code/``, entry points) sees the prefixed name or the plain
``sys.path``; a C extension is loaded once per process per file, so two models shipping the
same compiled library under the same name share its native state; memory held by a dropped
module lasts as long as something still refers to it.
"""

from __future__ import annotations

import builtins
import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import threading
import types
from collections.abc import Sequence
from typing import Any

PREFIX = "sagemaker_tfs_user_"
_PLAIN_IMPORT = builtins.__import__
_PYTHON_LOADERS = (importlib.machinery.SourceFileLoader, importlib.machinery.SourcelessFileLoader)


def prefix_of(code_dir: str) -> str:
    """The name under which the modules of ``code_dir`` are imported."""
    digest = hashlib.sha1(os.path.abspath(code_dir).encode("utf-8")).hexdigest()[:12]
    return f"{PREFIX}{digest}"


class CodeNamespace:
    """The modules of one ``code/`` directory (its ``lib/`` first, then itself)."""

    def __init__(self, code_dir: str) -> None:
        self.prefix = prefix_of(code_dir)
        self.code_dir = code_dir
        self.paths = [
            path for path in (os.path.join(code_dir, "lib"), code_dir) if os.path.isdir(path)
        ]
        self.builtins = dict(vars(builtins))
        self.builtins["__import__"] = self._import
        self._provided: dict[str, bool] = {}
        package = types.ModuleType(self.prefix, f"The code of {code_dir}")
        package.__path__ = list(self.paths)
        package.__package__ = self.prefix
        sys.modules[self.prefix] = package
        _FINDER.register(self)

    def provides(self, top_level: str) -> bool:
        """Whether ``code/lib`` or ``code/`` has a module or package of that name."""
        found = self._provided.get(top_level)
        if found is None:
            spec = importlib.machinery.PathFinder.find_spec(top_level, self.paths)
            found = self._provided[top_level] = spec is not None
        return found

    def _import(
        self,
        name: str,
        globals: dict[str, Any] | None = None,  # noqa: A002 - __import__'s own names
        locals: Any = None,  # noqa: A002
        fromlist: Sequence[str] = (),
        level: int = 0,
    ) -> types.ModuleType:
        top_level = name.partition(".")[0]
        if level != 0 or not top_level or not self.provides(top_level):
            return _PLAIN_IMPORT(name, globals, locals, fromlist, level)
        prefixed = f"{self.prefix}.{name}"
        module = _PLAIN_IMPORT(prefixed, globals, locals, fromlist, 0)
        return module if fromlist else sys.modules[f"{self.prefix}.{top_level}"]

    def load(self, path: str, name: str = "inference") -> types.ModuleType:
        """Import the file ``path`` as ``PREFIX.name`` inside the namespace."""
        return import_file(path, f"{self.prefix}.{name}", self.builtins)

    def modules(self) -> list[str]:
        """The names of the namespace's modules in ``sys.modules``."""
        return [n for n in list(sys.modules) if n == self.prefix or n.startswith(self.prefix + ".")]

    def unload(self) -> None:
        """Forget the namespace: its modules leave ``sys.modules``."""
        _FINDER.unregister(self)
        for name in self.modules():
            sys.modules.pop(name, None)


def import_file(
    path: str, name: str, namespace_builtins: dict[str, Any] | None = None
) -> types.ModuleType:
    """The file ``path`` imported as module ``name`` (left out of ``sys.modules`` if it
    raises), given ``namespace_builtins`` first where there are some."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    if namespace_builtins is not None:
        spec.loader = _WithBuiltins(spec.loader, namespace_builtins)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


class _WithBuiltins(importlib.abc.Loader):
    """A module's usual loader that gives the module its namespace's builtins first."""

    def __init__(self, loader: Any, namespace_builtins: dict[str, Any]) -> None:
        self._loader = loader
        self._builtins = namespace_builtins

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        module.__dict__["__builtins__"] = self._builtins
        self._loader.exec_module(module)

    def __getattr__(self, name: str) -> Any:  # get_data, get_resource_reader, is_package...
        return getattr(self._loader, name)


class _NamespaceFinder(importlib.abc.MetaPathFinder):
    """Finds ``PREFIX<digest>.a.b`` in its namespace's directories, loaded with its builtins."""

    def __init__(self) -> None:
        self._namespaces: dict[str, CodeNamespace] = {}
        self._lock = threading.Lock()

    def register(self, namespace: CodeNamespace) -> None:
        with self._lock:
            self._namespaces[namespace.prefix] = namespace
            if self not in sys.meta_path:
                sys.meta_path.insert(0, self)

    def unregister(self, namespace: CodeNamespace) -> None:
        with self._lock:
            self._namespaces.pop(namespace.prefix, None)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        prefix, dot, _ = fullname.partition(".")
        namespace = self._namespaces.get(prefix) if dot else None
        if namespace is None or path is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and isinstance(spec.loader, _PYTHON_LOADERS):
            spec.loader = _WithBuiltins(spec.loader, namespace.builtins)
        return spec


_FINDER = _NamespaceFinder()
